#!/usr/bin/env bash
# Serving benchmarks for the GPU machine (device tool), after
# `scripts/pack_for_device.sh` here and with `carry: [".carry"]`; run it on
# the kind with two GPUs (nvidia-h200-x2) for step 3.
#   1. the instance-group and CUDA tests (every visible GPU);
#   2. served vs in-process on one GPU (scripts/serve_bench.sh: saturation
#      throughput ratio and the p99 check at half load), issue 5;
#   3. one model served with one instance per GPU: saturation throughput over
#      HTTP with 1 GPU and with every GPU, the speed-up, and the share of
#      batches each GPU ran (from /metrics), issue 6;
#   4. identical results from every GPU: the same texts through a model pinned
#      to each GPU (config.pbtxt instance_group gpus: [N]), compared exactly;
#   5. the CUDA engine alone: timed GEMM algorithm choice (BERTRT_GEMM_TUNING=1)
#      against the heuristic's first answer, interleaved, and the
#      per-operation profile at batch 1 and 128 (issue 4);
#   6. GPU and CPU instances of one model side by side
#      (tests/server/test_gpu_serving.py, pytest against the real binary).
# Logs and JSON come back in $OUT/details.tar.gz; bench/RESULTS.md as $OUT/RESULTS.md.
# STEPS picks steps (default "1 2 3 4"); DURATION is seconds per load step.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
export PYTHONUNBUFFERED=1
BIN=$PWD/.carry/bin/bertrt
STEPS=${STEPS:-1 5 2 3 4}
DURATION=${DURATION:-5}
status=0
want() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=index,name,memory.total --format=csv | tee "$OUT/gpus.csv"
NGPU=$(($(wc -l < "$OUT/gpus.csv") - 1))
GPUS_ALL=$(seq -s, 0 $((NGPU - 1)))

model=/tmp/bertrt-bench/bert-base-seqcls
[ -f $model/model.safetensors ] || python3 scripts/make_random_model.py --preset bert-base \
  --head seq-cls --num-labels 2 -o $model > /dev/null
# Server settings for GPU saturation: batches of up to 128 sequences of ~128 tokens.
SERVE_FLAGS=(--device cuda --precision fp16 --max-batch-size 128 --max-batch-tokens 16384
             --max-queue-size 4096)
LOAD_FLAGS=(--lengths 100:126 --sequences-per-request 8 --duration-s "$DURATION" --warmup-s 2)

source "$(dirname "$0")/serve_util.sh"  # start_server LOG ARGS...: sets SERVER and URL
stop_server() { kill -TERM "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; }

if want 1; then
  echo "== 1. instance-group and CUDA tests"
  .carry/bin/bertrt_tests --gtest_filter='ModelConfig*:Scheduler*:Cuda*' > "$OUT/tests.log" 2>&1 \
    || { tail -40 "$OUT/tests.log"; status=1; }
  tail -3 "$OUT/tests.log"
fi

if want 2; then
  echo "== 2. served vs in-process, one GPU (1 and 8 texts per request)"
  for seqs in 1 8; do
    BIN=$BIN DURATION=$DURATION WORK=$OUT/serve_bench_s$seqs SEQS=$seqs \
      LABEL="H200, BERT-base fp16, 1 GPU, $seqs text(s) per request" \
      CONCURRENCY=1,4,16,32,64,128 LENGTHS=100:126 \
      bash scripts/serve_bench.sh $model "${SERVE_FLAGS[@]}" --gpus 0 \
      > "$OUT/serve_bench_s$seqs.log" 2>&1 || status=1
    tail -16 "$OUT/serve_bench_s$seqs.log"
  done
fi

if want 3; then
  echo "== 3. one instance per GPU: served throughput with 1 and $NGPU GPUs"
  for gpus in 0 "$GPUS_ALL"; do
    tag=gpus_${gpus//,/_}
    start_server "$OUT/serve_$tag.log" $model "${SERVE_FLAGS[@]}" --gpus "$gpus" --grpc-port 0 || { status=1; continue; }
    "$BIN" bench --url "$URL" --concurrency 16,32,64,128 "${LOAD_FLAGS[@]}" \
      --json "$OUT/multigpu_$tag.json" 2>&1 | tee "$OUT/multigpu_$tag.log" || status=1
    curl -s "$URL/metrics" | grep -E '^bertrt_(instance|gpu)_' > "$OUT/metrics_$tag.txt"
    stop_server
  done
  python3 scripts/device_report.py multigpu --out "$OUT" --gpus "$GPUS_ALL" --results bench/RESULTS.md \
    --command "STEPS=3 bash scripts/device_serve.sh" || status=1
fi

if want 4; then
  echo "== 4. identical results from every GPU"
  repo=/tmp/bertrt-bench/repo
  rm -rf $repo
  for ((g = 0; g < NGPU; g++)); do
    mkdir -p $repo/gpu$g
    ln -s $model $repo/gpu$g/1
    printf 'instance_group [ { count: 1 kind: KIND_GPU gpus: [ %d ] } ]\n' $g > $repo/gpu$g/config.pbtxt
  done
  start_server "$OUT/serve_repo.log" --model-repository $repo --device cuda --precision fp16 \
    --grpc-port 0 || status=1
  python3 - "$URL" "$NGPU" <<'PY' || status=1
import json, sys, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
texts = ["the quick brown fox", "a b c " * 40, "hello world", "one more sentence of text"] * 8
body = json.dumps({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}]}).encode()
outs = []
for g in range(n):
    req = urllib.request.Request(f"{url}/v2/models/gpu{g}/infer", body, {"Content-Type": "application/json"})
    outs.append(json.load(urllib.request.urlopen(req))["outputs"][0]["data"])
same = all(o == outs[0] for o in outs)
print(f"[identical] {len(texts)} texts on {n} GPUs: outputs bitwise equal: {same}")
sys.exit(0 if same else 1)
PY
  stop_server
fi
if want 5; then
  echo "== 5. GEMM tuning A/B and per-operation profile (BERT-base fp16, seq 128)"
  for rep in 1 2; do
    for b in 1 8 128; do
      for tuning in 0 1; do
        BERTRT_GEMM_TUNING=$tuning "$BIN" bench $model --device cuda --precision fp16 \
          --batch-size $b --seq-len 128 --iterations 100 --warmup 20 \
          --json "$OUT/perf_b${b}_t${tuning}_r${rep}.json" > /dev/null || status=1
      done
    done
  done
  for b in 1 128; do
    "$BIN" bench $model --device cuda --precision fp16 --batch-size $b --seq-len 128 \
      --iterations 50 --warmup 10 --profile --json "$OUT/profile_b$b.json" \
      | tee "$OUT/profile_b$b.txt" || status=1
  done
  python3 scripts/device_report.py perf --out "$OUT" --results bench/RESULTS.md \
    --command "STEPS=5 bash scripts/device_serve.sh" || status=1
fi
if want 6; then
  echo "== 6. GPU and CPU instances side by side"
  BERTRT_BIN=$BIN python3 -m pytest -q -p no:cacheprovider tests/server/test_gpu_serving.py \
    2>&1 | tail -5 || status=1
fi
cp bench/RESULTS.md "$OUT/RESULTS.md"
# The device tool brings back only a few files: everything but RESULTS.md
# travels as one archive.
(cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name RESULTS.md ! -name details.tar.gz -print0 |
   xargs -0 -r tar -czf details.tar.gz --remove-files)
exit $status

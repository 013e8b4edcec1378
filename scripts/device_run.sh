#!/usr/bin/env bash
# The one command for the GPU machine (device tool), after
# `scripts/pack_for_device.sh` here and with `carry: [".carry"]`:
#   1. the CUDA engine's tests (parity with the CPU engine, errors);
#   2. `bertrt bench --device cuda` (fp16): random BERT-base at seq 128,
#      batch 1, 8, 128, 32 and a ragged 32 x 16..128; BERT-large seq 384 b256;
#   3. the CPU benchmark against ONNX Runtime and PyTorch on the host CPU;
#   4. plans: CPU-built plans served on CUDA, CUDA-built plans served on the
#      CPU, and the BERT-base plan build / time-to-serving-ready benchmark;
#   5. per-operation profiles (`bertrt bench --profile`) with the exact and
#      the tanh-form GELU: BERT-base seq 128 at batch 1 and 128, BERT-large
#      seq 384 at batch 256.
#   6. served vs in-process (scripts/serve_bench.sh, 8 texts per request):
#      saturation and the p99 at half load.
#   7. GEMM choices a `bertrt build --device cuda` stores in the plan against
#      cuBLASLt's heuristic (bench/tuned_plan_bench.py; LARGE=1 adds BERT-large).
#   8. where a start goes: `bertrt run PLAN` with BERTRT_TRACE_STARTUP=1, from
#      page cache and cold, three times each.
# CUDA_BENCH=1 adds bench/cuda_bench.py (bertrt vs PyTorch) to step 1.
# bench/RESULTS.md comes back as $OUT/RESULTS.md, everything else in
# $OUT/details.tar.gz. STEPS picks the steps (default "1 2 3 4"), to fit a
# short device lease.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
export PYTHONUNBUFFERED=1
status=0
STEPS=${STEPS:-1 2 3 4}
want() { [[ " $STEPS " == *" $1 "* ]]; }
# A random seq-cls model of preset $1 in directory $2, made once; further
# arguments go to scripts/make_random_model.py.
random_model() {
  local preset=$1 dir=$2
  shift 2
  [ -f "$dir/model.safetensors" ] || python3 scripts/make_random_model.py --preset "$preset" \
    --head seq-cls --num-labels 2 "$@" -o "$dir" > /dev/null
}

if want 1; then
echo "== 1. CUDA tests"
bash scripts/device_cuda.sh || status=1
fi

if want 2; then
echo "== 2. CUDA engine smoke benchmark (BERT-base, random weights)"
model=/tmp/bertrt-bench/bert-base-seqcls large=/tmp/bertrt-bench/bert-large-seqcls
random_model bert-base $model
random_model bert-large $large --dtype f16
bench() { .carry/bin/bertrt bench "$@" --device cuda --precision fp16 2>/dev/null | tail -1 | tee -a "$OUT/cuda_bench.log" || status=1; }
for b in 1 8 32 128; do bench $model --batch-size $b --seq-len 128 --iterations 200 --warmup 20; done
bench $model --batch-size 32 --lengths 16:128 --iterations 200 --warmup 20
bench $large --batch-size 256 --seq-len 384 --iterations 10 --warmup 3
fi

if want 3; then
echo "== 3. CPU benchmark vs ONNX Runtime and PyTorch"
bash scripts/device_cpu_bench.sh || status=1
fi

if want 4; then
echo "== 4. Plans: CPU-built plan on the GPU, GPU-built plan on the CPU, build/load timing"
bash scripts/device_plan.sh || status=1
fi

if want 5; then
echo "== 5. Per-operation profiles, exact and tanh-form GELU"
base=/tmp/bertrt-bench/bert-base-seqcls large=/tmp/bertrt-bench/bert-large-seqcls
for preset in bert-base bert-large; do
  random_model $preset /tmp/bertrt-bench/$preset-seqcls --dtype f16
done
for gelu in exact tanh; do
  for b in 1 128; do
    .carry/bin/bertrt bench $base --device cuda --precision fp16 --batch-size $b --seq-len 128 \
      --iterations 50 --warmup 10 --profile --gelu $gelu | tee "$OUT/profile_base_b${b}_$gelu.txt" || status=1
  done
  .carry/bin/bertrt bench $large --device cuda --precision fp16 --batch-size 256 --seq-len 384 \
    --iterations 10 --warmup 3 --profile --gelu $gelu | tee "$OUT/profile_large_$gelu.txt" || status=1
done
# Whether timed algorithm choice finds a faster GEMM for the GELU epilogue.
BERTRT_GEMM_TUNING=1 .carry/bin/bertrt bench $base --device cuda --precision fp16 --batch-size 128 \
  --seq-len 128 --iterations 50 --warmup 10 --profile --gelu tanh | tee "$OUT/profile_base_b128_tanh_tuned.txt" || status=1
fi
if want 6; then
echo "== 6. Served vs in-process, 8 texts per request: saturation and half-load p99"
model=/tmp/bertrt-bench/bert-base-seqcls
random_model bert-base $model
BIN=$PWD/.carry/bin/bertrt DURATION=${DURATION:-4} WORK=$OUT/serve_bench SEQS=8 \
  LABEL="H200, BERT-base fp16, 1 GPU, 8 texts per request" CONCURRENCY=${CONCURRENCY:-16,32,64} \
  LENGTHS=100:126 bash scripts/serve_bench.sh $model --device cuda --precision fp16 \
  --max-batch-size 128 --max-batch-tokens 16384 --max-queue-size 4096 > "$OUT/serve_bench.log" 2>&1 || status=1
tail -12 "$OUT/serve_bench.log"
fi
if want 7; then
echo "== 7. GEMM choices stored in the plan vs the heuristic"
python3 bench/tuned_plan_bench.py --bin .carry/bin/bertrt $([ "${LARGE:-0}" = 1 ] && echo --large) \
  > "$OUT/tuned_plan_bench.log" 2>&1 || status=1
tail -16 "$OUT/tuned_plan_bench.log"
fi
if want 8; then
echo "== 8. Where a start goes (BERTRT_TRACE_STARTUP=1): BERT-base fp16 plan, page cache and cold"
model=/tmp/bertrt-bench/bert-base-seqcls plan=/tmp/bertrt-bench/bert-base-fp16.plan
random_model bert-base $model
[ -f $plan ] || .carry/bin/bertrt build $model -o $plan --device cuda --precision fp16 > /dev/null 2>&1
for mode in warm cold warm cold warm cold; do
  # Cold: the page cache dropped (root only), so the plan, bertrt and the
  # CUDA libraries all come from disk.
  if [ $mode = cold ]; then sync; echo 3 > /proc/sys/vm/drop_caches || echo "(not permitted)"; fi
  echo "-- $mode"
  echo '{"text": "a short sentence"}' | BERTRT_TRACE_STARTUP=1 .carry/bin/bertrt run $plan \
    --device cuda 2>&1 >/dev/null | grep startup
done 2>&1 | tee "$OUT/startup_trace.log"
fi
cp bench/RESULTS.md "$OUT/RESULTS.md" 2>/dev/null
# The device tool brings back only a few files: everything but RESULTS.md
# travels as one archive.
(cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name RESULTS.md ! -name details.tar.gz -print0 |
   xargs -0 -r tar -czf details.tar.gz --remove-files)
exit $status

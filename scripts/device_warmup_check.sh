#!/usr/bin/env bash
# On the GPU machine (after scripts/device_unpack.sh): does warming up the
# batch shapes of serve_bench's half-load step remove its first-step p99?
# Without and then with --warmup-shapes covering batches of 1-32 texts of
# 100-126 words, scripts/half_load_repeat.sh runs the half-load step REPEATS
# times on one fresh server; then serve_bench runs with the warm-up on both
# sides, with 1 text per request and with 8 (batches of 8-128 texts). Lines
# go to stdout and $OUT.
#   bash scripts/device_warmup_check.sh [MODEL] [RATE]
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
MODEL=${1:-/tmp/bertrt-bench/bert-base-seqcls}
RATE=${2:-9900}
[ -f "$MODEL/model.safetensors" ] || python3 scripts/make_random_model.py --preset bert-base \
  --head seq-cls --num-labels 2 -o "$MODEL" > /dev/null
export BIN=${BIN:-$PWD/.carry/bin/bertrt}
FLAGS=(--device cuda --precision fp16 --max-batch-size 128 --max-batch-tokens 16384
       --max-queue-size 4096)
# Every batch of 1-32 texts of 115-192 tokens (100-126 words): the engine
# runs each distinct padded shape of that range once per instance.
SHAPES=${SHAPES:-1-32x115-192}
echo "warm-up shapes: $SHAPES" | tee "$OUT/warmup_check.txt"
for mode in none warm; do
  extra=()
  [ "$mode" = warm ] && extra=(--warmup-shapes "$SHAPES")
  echo "== half-load step x ${REPEATS:-3} on one server, warm-up: $mode" | tee -a "$OUT/warmup_check.txt"
  REPEATS=${REPEATS:-3} bash scripts/half_load_repeat.sh "$MODEL" "$RATE" "${FLAGS[@]}" "${extra[@]}" \
    2>&1 | tee -a "$OUT/warmup_check.txt"
done
echo "== serve_bench with the warm-up on both sides" | tee -a "$OUT/warmup_check.txt"
DURATION=4 WARMUP=1 SEQS=1 CONCURRENCY=256,512 LENGTHS=100:126 RESULTS=bench/RESULTS.md \
  LABEL="--warmup-shapes" bash scripts/serve_bench.sh "$MODEL" "${FLAGS[@]}" \
  --warmup-shapes "$SHAPES" 2>&1 | grep -E "^\| c=|saturation|half load" | tee -a "$OUT/warmup_check.txt"
SHAPES8=$(seq -s, -f "%gx115-192" 8 8 128)
echo "== serve_bench, 8 texts per request, warm-up $SHAPES8" | tee -a "$OUT/warmup_check.txt"
DURATION=4 WARMUP=1 SEQS=8 CONCURRENCY=16,32,64,128 LENGTHS=100:126 RESULTS=bench/RESULTS.md \
  LABEL="--warmup-shapes, 8 texts per request" bash scripts/serve_bench.sh "$MODEL" "${FLAGS[@]}" \
  --warmup-shapes "$SHAPES8" 2>&1 | grep -E "^\| c=|saturation|half load" | tee -a "$OUT/warmup_check.txt"
cp bench/RESULTS.md "$OUT/RESULTS.md"

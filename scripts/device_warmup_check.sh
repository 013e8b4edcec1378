#!/usr/bin/env bash
# On the GPU machine (.carry/ from scripts/pack_for_device.sh): does warming up the
# batch shapes of serve_bench's half-load step remove its first-step p99?
# Without and then with --warmup-shapes covering batches of 1-32 texts of
# 100-126 words, scripts/half_load_repeat.sh runs the half-load step REPEATS
# times on one fresh server; then serve_bench runs with the warm-up on both
# sides, with 1 text per request and with 8 (batches of 8-128 texts). Lines
# go to stdout and $OUT.
#   bash scripts/device_warmup_check.sh [MODEL] [RATE]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
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
# serve_bench_warm TEXTS_PER_REQUEST CONCURRENCY SHAPES LABEL: serve_bench
# with the warm-up on both sides, its summary lines to stdout and $OUT.
serve_bench_warm() {
  echo "== serve_bench, $1 text(s) per request, warm-up $3" | tee -a "$OUT/warmup_check.txt"
  DURATION=4 WARMUP=1 SEQS=$1 CONCURRENCY=$2 LENGTHS=100:126 RESULTS=bench/RESULTS.md \
    LABEL="$4" bash scripts/serve_bench.sh "$MODEL" "${FLAGS[@]}" --warmup-shapes "$3" 2>&1 |
    grep -E "^\| c=|saturation|half load" | tee -a "$OUT/warmup_check.txt"
}
serve_bench_warm 1 256,512 "$SHAPES" "--warmup-shapes"
serve_bench_warm 8 16,32,64,128 "$(seq -s, -f "%gx115-192" 8 8 128)" \
  "--warmup-shapes, 8 texts per request"
cp bench/RESULTS.md "$OUT/RESULTS.md"

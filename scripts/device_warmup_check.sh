#!/usr/bin/env bash
# On the GPU machine (after scripts/device_unpack.sh): does warming up the
# batch shapes of serve_bench's half-load step remove its first-step p99?
# Without and then with --warmup-shapes listing every shape that batches of
# 1..MAX_TEXTS texts of 100-126 words reach (their max length rounds to 192;
# each token bucket the batch can fall in), scripts/half_load_repeat.sh runs
# the half-load step REPEATS times on one fresh server; then serve_bench runs
# once with the warm-up on both sides. Lines go to stdout and $OUT.
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
# The buckets of src/backends/cuda/batch_shape.cc: tokens to 64 up to 2,048,
# then 16 steps per doubling; sequences to a power of two up to 8, then to 8.
SHAPES=$(MAX_TEXTS=${MAX_TEXTS:-32} python3 - <<'EOF'
import os
def round_up(n, step):
    return -(-n // step) * step
def token_bucket(t):
    step = 64
    while step * 2 * 16 <= t:
        step *= 2
    return round_up(t, step)
def seq_bucket(n):
    if n > 8:
        return round_up(n, 8)
    s = 1
    while s < n:
        s *= 2
    return s
def padded_shape(t, n, max_len):  # PaddedShape
    tokens = token_bucket(t)
    if tokens == t and seq_bucket(n) == n:
        return (t, n, round_up(max_len, 64))
    if tokens == t:
        tokens = token_bucket(t + 1)
    holders = -(-(tokens - t) // 64)
    return (tokens, seq_bucket(n + holders), round_up(max_len, 64))
# What warm-up batches of B sequences of L tokens (L in 129..192) run as.
warm = {}
for b in range(1, 2 * int(os.environ["MAX_TEXTS"]) + 1):
    for length in range(129, 193):
        warm.setdefault(padded_shape(b * length, b, length), f"{b}x{length}")
shapes, missed = [], set()
for n in range(1, int(os.environ["MAX_TEXTS"]) + 1):
    for total in range(n * 115, n * 175 + 1):  # ~1.15-1.75 tokens per word
        shape = padded_shape(total, n, 192)
        if shape not in warm:
            missed.add(shape)
        elif warm[shape] not in shapes:
            shapes.append(warm[shape])
import sys
print(f"{len(shapes)} warm-up shapes; {len(missed)} batch shapes no warm-up batch reaches",
      file=sys.stderr)
print(",".join(shapes))
EOF
)
echo "warm-up shapes: $(tr ',' '\n' <<< "$SHAPES" | wc -l)" | tee "$OUT/warmup_check.txt"
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
cp bench/RESULTS.md "$OUT/RESULTS.md"

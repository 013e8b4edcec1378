#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/
# from `BUILD_DIR=build-lead scripts/pack_for_device.sh`: `bertrt bench
# --profile` (each operation's time inside the CUDA graph) on random BERT-base
# (seq-cls, fp16) at batch 1, 32 and 128 x 128 tokens and on the ragged
# 32 x 16..128 batch, then the ragged batch against 32 x 128 and batch 1
# against 128, side by side (bench/profile_compare.py); with LARGE=1 also
# BERT-large at seq 384, batch 256. The models are bench/cuda_bench.py's (the
# same paths), made here when that has not run. Outputs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
make_model() {  # preset: prints the model's directory
  local dir=/tmp/bertrt-bench/$1-seqcls
  [ -f "$dir/model.safetensors" ] || python3 scripts/make_random_model.py --preset "$1" \
    --head seq-cls --num-labels 2 --dtype f16 -o "$dir" > /dev/null
  echo "$dir"
}
model=$(make_model bert-base)
rc=0
run() {  # name, bench arguments
  local name=$1
  shift
  .carry/bin/bertrt bench "$model" --device cuda --precision fp16 --iterations "${ITERATIONS:-300}" \
    --warmup 30 --profile "$@" --json "$OUT/profile_$name.json" > "$OUT/profile_$name.txt" || rc=1
  cat "$OUT/profile_$name.txt"
}
run ragged --batch-size 32 --lengths 16:128
run b32 --batch-size 32 --seq-len 128
run b1 --batch-size 1 --seq-len 128
run b128 --batch-size 128 --seq-len 128
if [ "${LARGE:-0}" = 1 ]; then
  model=$(make_model bert-large) ITERATIONS=10
  run large --batch-size 256 --seq-len 384
fi
for pair in "ragged b32" "b1 b128"; do
  set -- $pair
  echo "== $1 against $2"
  python3 bench/profile_compare.py "$OUT/profile_$1.json" "$OUT/profile_$2.json" \
    | tee "$OUT/compare_$1_$2.md" || rc=1
done
exit "$rc"

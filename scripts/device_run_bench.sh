#!/usr/bin/env bash
# On the GPU machine, from the repository root (after pack_for_device.sh with
# PARITY_DATA=1): `bertrt run` on a large file against sentence-transformers'
# encode on the same texts (bench/run_bench.py), BERT-base shape with mean
# pooling and Normalize (random weights, the default model's tokenizer), fp16.
# TEXTS (default 60000) texts; results appended to $OUT/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
TEXTS=${TEXTS:-60000}
model=/tmp/bertrt_run_bench/st-bert-base
if [ ! -f "$model/modules.json" ]; then
  python3 scripts/make_random_model.py --preset bert-base --head sentence --pooling mean \
    --normalize --max-seq-length 128 --tokenizer-from .carry/parity/all-MiniLM-L6-v2 -o "$model"
fi
cp bench/RESULTS.md "$OUT/RESULTS.md"
python3 bench/run_bench.py --bertrt .carry/bin/bertrt --model "$model" --device cuda \
  --precision fp16 --texts "$TEXTS" --results "$OUT/RESULTS.md" "$@"

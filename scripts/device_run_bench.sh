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

# The server on the same model and texts: 8 texts per request, closed loop at
# rising concurrency (`bertrt bench --url`, KServe's infer route), so that
# its saturation is read beside run's and sentence-transformers' figures.
if [ "${SERVER:-1}" = 1 ]; then
  source scripts/serve_util.sh  # start_server LOG ARGS...: sets SERVER and URL
  texts=/tmp/bertrt_run_bench/texts.txt
  python3 -c "
import json, sys
lines = [json.loads(x)['text'] for x in open('tests/data/tokenizer/corpus.jsonl', encoding='utf-8').read().split('\n') if x]
with open('$texts', 'w', encoding='utf-8') as f:
    for t in lines: f.write(t.replace('\n', ' ').replace('\r', ' ') + '\n')"
  BIN=$PWD/.carry/bin/bertrt
  start_server "$OUT/serve_run_bench.log" "$model" --device cuda --precision fp16 \
    --max-batch-size 256 --max-batch-tokens 32768 --max-queue-size 4096 --grpc-port 0
  "$BIN" bench --url "$URL" --texts "$texts" --sequences-per-request 8 --concurrency 16,32,64,128 \
    --duration-s 5 --warmup-s 2 | tee "$OUT/serve_run_bench.txt"
  kill -TERM "$SERVER"; wait "$SERVER" || true
fi

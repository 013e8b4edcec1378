#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/ from
# `PARITY_DATA=1 BUILD_DIR=build scripts/pack_for_device.sh` of a CUDA build:
#   1. the token-classification and question-answering goldens on the GPU
#      (tests/models/test_pipeline_goldens.py -k cuda: `bertrt run --task` in fp32);
#   2. bench/served_profile.py (issue 50) in fp16 on the all-MiniLM-L6-v2 that
#      PARITY_DATA carries and on a BERT-base-shaped sentence-transformers model made
#      here (random weights, the same tokenizer): served by stage against in-process.
# Logs in $OUT; bench/RESULTS.md comes back as $OUT/RESULTS.md. PROFILE=0 skips step 2;
# SECONDS_PER_STEP (default 5) and CONCURRENCY (default 64) shape it.
set -uo pipefail
source scripts/device_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
rc=0
BERTRT_BIN=$PWD/.carry/bin/bertrt python3 -m pytest -q -p no:cacheprovider \
  tests/models/test_pipeline_goldens.py -k cuda 2>&1 | tee "$OUT/pipeline_goldens_cuda.log" | tail -5
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
if [ "${PROFILE:-1}" = 1 ]; then
  [ -d .carry/parity ] || tar -xJf .carry/parity.tar.xz -C .carry
  base=/tmp/bertrt-bench/bert-base-st
  [ -f $base/model.safetensors ] || python3 scripts/make_random_model.py --preset bert-base \
    --head sentence --pooling mean --normalize --tokenizer-from .carry/parity/tokenizer \
    -o $base > /dev/null
  for model in .carry/parity/all-MiniLM-L6-v2 $base; do
    python3 bench/served_profile.py --bertrt .carry/bin/bertrt --model "$model" --device cuda \
      --precision fp16 --seconds "${SECONDS_PER_STEP:-5}" --concurrency "${CONCURRENCY:-64}" \
      --batching "--max-batch-size 256 --max-batch-tokens 32768" --serve-args "--max-queue-size 8192" \
      2>&1 | tee -a "$OUT/served_profile.log" | grep -v '^|' || rc=1
  done
  cp bench/RESULTS.md "$OUT/RESULTS.md"
fi
exit "$rc"

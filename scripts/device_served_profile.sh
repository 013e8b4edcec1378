#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/ from
# `PARITY_DATA=1 BUILD_DIR=build scripts/pack_for_device.sh` of a CUDA build:
#   1. the token-classification and question-answering goldens on the GPU
#      (tests/models/test_pipeline_goldens.py -k cuda: `bertrt run --task` in fp32);
#   2. bench/served_profile.py (issue 50) in fp16, on MODELS: "minilm" (the
#      all-MiniLM-L6-v2 that PARITY_DATA carries) and/or "base" (a BERT-base-shaped
#      sentence-transformers model made here: random weights, the same tokenizer). With
#      .carry/baseline.xz (an earlier build's bertrt, xz-compressed) each model is
#      profiled with that binary first, then with this one: an A/B on one lease.
# Logs in $OUT; bench/RESULTS.md comes back as $OUT/RESULTS.md. GOLDENS=0 skips step 1;
# SECONDS_PER_STEP (default 4) and CONCURRENCY (default 64) shape step 2.
set -uo pipefail
source scripts/device_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
rc=0
if [ "${GOLDENS:-1}" = 1 ]; then
  BERTRT_BIN=$PWD/.carry/bin/bertrt python3 -m pytest -q -p no:cacheprovider \
    tests/models/test_pipeline_goldens.py -k cuda 2>&1 | tee "$OUT/pipeline_goldens_cuda.log" | tail -5
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
[ -d .carry/parity ] || tar -xJf .carry/parity.tar.xz -C .carry
bins=()
if [ -f .carry/baseline.xz ]; then
  xz -dc .carry/baseline.xz > /tmp/bertrt-baseline && chmod +x /tmp/bertrt-baseline
  bins+=(/tmp/bertrt-baseline)
fi
bins+=("$PWD/.carry/bin/bertrt")
for name in ${MODELS:-minilm base}; do
  model=.carry/parity/all-MiniLM-L6-v2
  if [ "$name" = base ]; then
    model=/tmp/bertrt-bench/bert-base-st
    [ -f $model/model.safetensors ] || python3 scripts/make_random_model.py --preset bert-base \
      --head sentence --pooling mean --normalize --tokenizer-from .carry/parity/tokenizer \
      -o $model > /dev/null
  fi
  for bin in "${bins[@]}"; do
    echo "== $name with $bin" | tee -a "$OUT/served_profile.log"
    python3 bench/served_profile.py --bertrt "$bin" --model "$model" --device cuda --precision fp16 \
      --seconds "${SECONDS_PER_STEP:-4}" --concurrency "${CONCURRENCY:-64}" \
      --batching "--max-batch-size 256 --max-batch-tokens 32768" --serve-args "--max-queue-size 8192" \
      2>&1 | tee -a "$OUT/served_profile.log" | grep -v '^|' || rc=1
  done
done
cp bench/RESULTS.md "$OUT/RESULTS.md"
exit "$rc"

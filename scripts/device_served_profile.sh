#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/ from
# `BUILD_DIR=build scripts/pack_for_device.sh` of a CUDA build and .carry/tokenizer/ (the
# default model's tokenizer files: the working tree and .carry must stay under 64 MiB):
#   1. the token-classification and question-answering goldens on the GPU
#      (tests/models/test_pipeline_goldens.py -k cuda: `bertrt run --task` in fp32);
#   2. bench/served_profile.py (issue 50) in fp16, on MODELS: "minilm" and/or "base",
#      sentence-transformers models (mean pooling, Normalize) of all-MiniLM-L6-v2's and
#      BERT-base's shapes made here with random weights (the time does not depend on them)
#      and the carried tokenizer. With .carry/baseline.xz (an earlier build's bertrt,
#      xz-compressed) each model is profiled with that binary first, then with this one:
#      an A/B on one lease.
# Logs in $OUT; bench/RESULTS.md comes back as $OUT/RESULTS.md. GOLDENS=0 skips step 1;
# SECONDS_PER_STEP (default 4), CONCURRENCY (default 64), WORDS (default 40,380) and TEXTS
# (texts per request, default 1,8,32) shape step 2. VARIANTS: server settings to compare on
# this build (the baseline runs as given), separated by ";", each more served_profile.py
# arguments (an empty one: as given above), e.g. "; --server-cpus 0-7 --client-cpus 8-15".
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
bins=()
if [ -f .carry/baseline.xz ]; then
  xz -dc .carry/baseline.xz > /tmp/bertrt-baseline && chmod +x /tmp/bertrt-baseline
  bins+=(/tmp/bertrt-baseline)
fi
bins+=("$PWD/.carry/bin/bertrt")
for name in ${MODELS:-minilm base}; do
  model=/tmp/bertrt-bench/$name-st
  shape=(--preset bert-base)
  [ "$name" = minilm ] && shape+=(--hidden 384 --layers 6 --heads 12 --intermediate 1536)
  [ -f $model/model.safetensors ] || python3 scripts/make_random_model.py "${shape[@]}" \
    --head sentence --pooling mean --normalize --tokenizer-from .carry/tokenizer -o $model > /dev/null
  for bin in "${bins[@]}"; do
    variants=("")
    # The variants on this build only: the baseline may not know their options.
    [ "$bin" = "$PWD/.carry/bin/bertrt" ] && IFS=';' read -r -a variants <<< "${VARIANTS:-}"
    [ ${#variants[@]} = 0 ] && variants=("")
    for variant in "${variants[@]}"; do
      echo "== $name with $bin $variant" | tee -a "$OUT/served_profile.log"
      # shellcheck disable=SC2086  # a variant: a list of arguments
      eval "extra=($variant)"
      python3 bench/served_profile.py --bertrt "$bin" --model "$model" --device cuda --precision fp16 \
        --seconds "${SECONDS_PER_STEP:-4}" --concurrency "${CONCURRENCY:-64}" \
        --words "${WORDS:-40,380}" --texts-per-request "${TEXTS:-1,8,32}" \
        --batching "--max-batch-size 256 --max-batch-tokens 32768" --serve-args "--max-queue-size 8192" \
        "${extra[@]}" 2>&1 | tee -a "$OUT/served_profile.log" | grep -v '^|' || rc=1
    done
  done
done
cp bench/RESULTS.md "$OUT/RESULTS.md"
exit "$rc"

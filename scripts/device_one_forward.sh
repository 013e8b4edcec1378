#!/usr/bin/env bash
# Issue 45's gate for a change to the CUDA backend's structure (the one forward;
# then the internal tuning switches and the files grouped by job), on the GPU
# machine, from the repository root, one step per device call (each within the
# 10-minute limit):
#   STEP=tests  bash scripts/device_one_forward.sh   # the op harness (CPU and CUDA, every
#               precision) and the CUDA unit tests, the HF goldens on the GPU (device_cuda.sh)
#   STEP=parity bash scripts/device_one_forward.sh   # the full parity suite (device_parity.sh;
#               with .whl/ carried, its question-answering pipeline cases too)
#   STEP=ab     bash scripts/device_one_forward.sh   # interleaved A/B against the previous
#               engine: device_ab.sh on BERT-base, then family_bench.py for each binary
# .carry/ holds the change's CUDA build (BUILD_DIR=... scripts/pack_for_device.sh; for
# `parity` with .whl/, BINS="bertrt bertrt_parity_runner" keeps the carry under its
# limit); for `ab`, .carry/baseline.xz is the previous main's bertrt binary,
# xz-compressed. The rule: every parity case passes, and no A/B figure is more
# than 1% slower.
set -uo pipefail
source scripts/device_env.sh
case "${STEP:-tests}" in
  tests) bash scripts/device_cuda.sh ;;
  parity) bash scripts/device_parity.sh ;;
  ab)
    base=/tmp/baseline-bertrt
    python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
      .carry/baseline.xz "$base" && chmod +x "$base"
    REPEATS=${REPEATS:-3} bash scripts/device_ab.sh "main=$base" "one=.carry/bin/bertrt" \
      | tee "$OUT/ab_bert_base.txt"
    for b in "$base" .carry/bin/bertrt; do
      python3 bench/family_bench.py --bertrt "$b" --deadline-s 120 2>&1 | tail -20 \
        | tee -a "$OUT/family_bench.txt"
    done
    ;;
  *) echo "STEP must be tests, parity or ab" >&2; exit 2 ;;
esac

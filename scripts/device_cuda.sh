#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/
# from `BUILD_DIR=build-cuda scripts/pack_for_device.sh`: the CUDA engine's
# unit tests (CUDA engine vs CPU engine parity, ragged batches, errors).
# Logs go to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
ldd .carry/bin/bertrt_tests > "$OUT/ldd.txt" 2>&1 || true
.carry/bin/bertrt_tests --gtest_filter='Cuda*' --gtest_output="xml:$OUT/cuda_tests.xml" \
  2>&1 | tee "$OUT/cuda_tests.log"
rc=${PIPESTATUS[0]}
echo "bertrt_tests exit code: $rc" | tee -a "$OUT/cuda_tests.log"
exit "$rc"

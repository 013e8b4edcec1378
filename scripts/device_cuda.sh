#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/
# from `BUILD_DIR=build-cuda scripts/pack_for_device.sh`: the CUDA engine's
# unit tests (CUDA engine vs CPU engine parity, ragged batches, CUDA graph
# replay, errors) and the HF golden tests on the GPU. With CUDA_BENCH=1 it
# then runs bench/cuda_bench.py (bertrt vs PyTorch eager / torch.compile, one
# run), whose section is appended to bench/RESULTS.md and copied to
# $OUT/RESULTS.md. Logs go to $OUT. CUDA_TEST_FILTER replaces the unit tests'
# filter (e.g. 'Cuda*:OpsHarness*:-CudaFp8Gemm*' to leave out the FP8 GEMM's
# two minutes where no GEMM code changed).
set -uo pipefail
source scripts/device_env.sh
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
ldd .carry/bin/bertrt_tests > "$OUT/ldd.txt" 2>&1 || true
.carry/bin/bertrt_tests --gtest_filter="${CUDA_TEST_FILTER:-Cuda*:OpsHarness*}" --gtest_output="xml:$OUT/cuda_tests.xml" \
  2>&1 | tee "$OUT/cuda_tests.log" | grep -E '^\[ *(FAILED|PASSED|OK|RUN) *\]|Failure|expected|Which is|bertrt_tests' | grep -v '^\[ RUN'
rc=${PIPESTATUS[0]}
echo "bertrt_tests exit code: $rc" | tee -a "$OUT/cuda_tests.log"
# The CUDA engine against the HF goldens through the real binary, every
# precision and GELU form.
BERTRT_BIN=$PWD/.carry/bin/bertrt python3 -m pytest -q -p no:cacheprovider \
  tests/models/test_goldens.py tests/models/test_pipeline_goldens.py -k cuda 2>&1 | tee "$OUT/cuda_goldens.log" | tail -5
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
if [ "${CUDA_BENCH:-0}" = 1 ]; then
  python3 bench/cuda_bench.py --bertrt .carry/bin/bertrt --results bench/RESULTS.md \
    --json-out "$OUT/cuda_bench.json" ${CUDA_BENCH_ARGS:-} 2>&1 | tee "$OUT/cuda_bench.log" || rc=1
  cp bench/RESULTS.md "$OUT/RESULTS.md"
fi
exit "$rc"

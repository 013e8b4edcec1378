#!/usr/bin/env bash
# Issue 46's FP8 on the GPU machine (branch issue46-fp8), from the repository
# root, one step per device call (each within the 10-minute limit), with
# .carry/ from `BUILD_DIR=<a CUDA build of the branch> scripts/pack_for_device.sh`:
#   STEP=tests  bash scripts/device_fp8.sh   # the FP8 GEMM's and every CUDA unit test,
#               the op harness, then the fp8 engine against the CPU's emulation
#               (tests/cli/test_fp8_gpu.py) and the fp16 goldens (nothing else moved)
#   STEP=parity bash scripts/device_fp8.sh   # the full parity suite (the CUDA code changed)
#   STEP=bench  bash scripts/device_fp8.sh   # bench/fp8_bench.py: fp8 vs fp16 vs PyTorch
# Results and logs go to $OUT.
set -uo pipefail
source scripts/device_env.sh
case "${STEP:-tests}" in
  tests)
    bash scripts/device_cuda.sh
    rc=$?
    BERTRT_BIN=$PWD/.carry/bin/bertrt python3 -m pytest -q -p no:cacheprovider \
      tests/cli/test_fp8_gpu.py tests/cli/test_cpu_precisions.py 2>&1 | tee "$OUT/fp8_tests.log" | tail -15
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    exit "$rc"
    ;;
  parity) bash scripts/device_parity.sh ;;
  bench)
    python3 bench/fp8_bench.py --bertrt .carry/bin/bertrt --results bench/RESULTS.md \
      ${FP8_BENCH_ARGS:-} 2>&1 | tee "$OUT/fp8_bench.log"
    cp bench/RESULTS.md "$OUT/RESULTS.md"
    ;;
  *) echo "STEP must be tests, parity or bench" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Issue 46's FP8 and INT8 on the GPU machine, from the repository root, one
# step per device call (each within the 10-minute limit), with
# .carry/ from `BUILD_DIR=<a CUDA build of the branch> scripts/pack_for_device.sh`:
#   STEP=tests  bash scripts/device_fp8.sh   # the FP8 GEMM's and every CUDA unit test,
#               the op harness, then the fp8 engine against the CPU's emulation
#               (tests/cli/test_fp8_gpu.py), the int8 engine against the CPU's int8
#               (tests/cli/test_int8_gpu.py) and the fp16 goldens (nothing else moved)
#   STEP=parity bash scripts/device_fp8.sh   # the full parity suite (the CUDA code changed)
#   STEP=bench  bash scripts/device_fp8.sh   # bench/fp8_bench.py: fp8, int8, fp16, PyTorch
#   STEP=gate   bash scripts/device_fp8.sh   # one call for a fix to the 8-bit paths, once the
#               other CUDA tests passed on this build: the 8-bit unit and CLI tests, the parity
#               suite's quick cases (QUICK=1, no sanitizers), then the bench, as far as what
#               was carried allows (below); each step under `timeout` so the call ends inside
#               the device tool's 10 minutes. With the trained-model test's data:
#               `BUILD_DIR=... SLIM=1 FP8_DATA=1 bash scripts/pack_for_device.sh`; UNIT_FILTER
#               (default CudaFp8*:OpsHarnessCuda.*) and UNIT_SECONDS pick the unit tests;
#               BENCH=0 skips the bench, PARITY=0 the parity cases, CLI_TESTS=0 the 8-bit
#               CLI tests; PROFILE=0 skips the
#               per-operation profiles of BERT-base b128 in fp8, int8 and fp16 after the bench.
# Results and logs go to $OUT.
set -uo pipefail
source scripts/device_env.sh
case "${STEP:-tests}" in
  tests)
    bash scripts/device_cuda.sh
    rc=$?
    BERTRT_BIN=$PWD/.carry/bin/bertrt python3 -m pytest -q -p no:cacheprovider \
      tests/cli/test_fp8_gpu.py tests/cli/test_int8_gpu.py tests/cli/test_cpu_precisions.py 2>&1 |
      tee "$OUT/fp8_tests.log" | tail -15
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    exit "$rc"
    ;;
  parity) bash scripts/device_parity.sh ;;
  bench)
    python3 bench/fp8_bench.py --bertrt .carry/bin/bertrt --results bench/RESULTS.md \
      ${FP8_BENCH_ARGS:-} 2>&1 | tee "$OUT/fp8_bench.log"
    cp bench/RESULTS.md "$OUT/RESULTS.md"
    ;;
  gate)
    # What was carried decides what runs: bertrt_tests (the FP8 unit tests),
    # bertrt_parity_runner (the parity suite's quick cases, no sanitizers),
    # .carry/parity/all-MiniLM-L6-v2 (the trained-weights test's model).
    rc=0
    # A SLIM payload counts on the machine's own OpenSSL, zlib and libgomp.
    ldd .carry/bin/bertrt | grep "not found" && exit 1
    if [ -x .carry/bin/bertrt_tests ]; then
      timeout "${UNIT_SECONDS:-150}" .carry/bin/bertrt_tests \
        --gtest_filter="${UNIT_FILTER:-CudaFp8*:OpsHarnessCuda.*}" 2>&1 | tee "$OUT/fp8_unit.log" |
        grep -E '^\[ *(FAILED|PASSED|OK) *\]|Failure|Which is'
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    fi
    [ -d .carry/parity/all-MiniLM-L6-v2 ] &&
      export BERTRT_DEFAULT_MODEL_DIR=$PWD/.carry/parity/all-MiniLM-L6-v2
    if [ "${CLI_TESTS:-1}" = 1 ]; then
      BERTRT_BIN=$PWD/.carry/bin/bertrt timeout "${TEST_SECONDS:-150}" python3 -m pytest -q -s \
        -p no:cacheprovider tests/cli/test_fp8_gpu.py tests/cli/test_int8_gpu.py 2>&1 |
        tee "$OUT/fp8_tests.log" | tail -15
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    fi
    if [ -x .carry/bin/bertrt_parity_runner ] && [ "${PARITY:-1}" = 1 ]; then
      QUICK=${QUICK:-1} SANITIZE=0 timeout "${PARITY_SECONDS:-150}" bash scripts/device_parity.sh ||
        rc=1
    fi
    if [ "${BENCH:-1}" = 1 ]; then
      timeout "${BENCH_SECONDS:-240}" python3 bench/fp8_bench.py --bertrt .carry/bin/bertrt \
        --results bench/RESULTS.md ${FP8_BENCH_ARGS:-} 2>&1 | tee "$OUT/fp8_bench.log" || rc=1
      cp bench/RESULTS.md "$OUT/RESULTS.md"
    fi
    # Where 8 bits' time goes against fp16's: BERT-base b128 s128, per operation.
    if [ "${PROFILE:-1}" = 1 ]; then
      for v in fp8 int8 fp16; do
        m=/tmp/bertrt-bench/bert-base-seqcls
        [ $v != fp16 ] && m=/tmp/bertrt-bench/bert-base.$v.plan
        timeout 60 .carry/bin/bertrt bench $m --device cuda \
          --precision $v --batch-size 128 --seq-len 128 --iterations 50 --profile \
          > "$OUT/profile_$v.txt" 2>&1
        grep -A14 '^per operation' "$OUT/profile_$v.txt"
      done
    fi
    exit "$rc"
    ;;
  *) echo "STEP must be tests, parity, bench or gate" >&2; exit 2 ;;
esac

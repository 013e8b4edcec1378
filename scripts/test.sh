#!/usr/bin/env bash
# The test command: installs what is needed, fetches the default model, builds
# bertrt and runs every test: GoogleTest unit tests (ctest), pytest end-to-end
# tests against the real binary (tokenizer parity with HF tokenizers, CLI,
# default model vs sentence-transformers), and bounded fuzzing of the parsers.
# FUZZ_SECONDS (default 20: fourteen targets, so the whole command stays within
# 30 minutes on 2 cores; at 30 s each it took 31) is the time per fuzz target;
# 0 skips fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-20}

bash scripts/install_deps.sh
bash scripts/fetch_default_model.sh
bash scripts/build.sh

echo "[test] unit tests (ctest)"
ctest --test-dir build --output-on-failure -j"$(nproc)"

echo "[test] end-to-end tests (pytest, real binary)"
BERTRT_BIN="$PWD/build/bertrt" BERTRT_DEFAULT_MODEL_DIR="$PWD/models/all-MiniLM-L6-v2" \
  python3 -m pytest -q tests

if [ "$FUZZ_SECONDS" -gt 0 ]; then
  echo "[test] fuzzing each parser for ${FUZZ_SECONDS}s (clang libFuzzer + ASan/UBSan)"
  mkdir -p build-fuzz
  if ! CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DBERTRT_BUILD_FUZZERS=ON -DBERTRT_WITH_CUDA=OFF -DBERTRT_BUILD_TESTS=OFF -DBERTRT_BUILD_BENCH=OFF \
      "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
      > build-fuzz/cmake.log 2>&1; then
    cat build-fuzz/cmake.log; exit 1
  fi
  ninja -C build-fuzz -j"$(nproc)" > build-fuzz/build.log 2>&1 || { tail -50 build-fuzz/build.log; exit 1; }
  for fuzzer in build-fuzz/*_fuzz; do
    # The corpus directories end in _fuzz too, from a previous run.
    [ -f "$fuzzer" ] && [ -x "$fuzzer" ] || continue
    name=$(basename "$fuzzer")
    corpus=fuzz/corpus/${name%_fuzz}
    mkdir -p "build-fuzz/corpus-$name"
    echo "[fuzz] $name for ${FUZZ_SECONDS}s"
    "$fuzzer" -max_total_time="$FUZZ_SECONDS" -print_final_stats=0 "build-fuzz/corpus-$name" \
      $( [ -d "$corpus" ] && echo "$corpus" ) > "build-fuzz/$name.log" 2>&1 \
      || { tail -60 "build-fuzz/$name.log"; echo "[fuzz] $name FAILED"; exit 1; }
    grep -E "^#[0-9]+.*DONE" "build-fuzz/$name.log" | tail -1 || true
  done
fi
echo "[test] all tests passed"

#!/usr/bin/env bash
# Configures and builds bertrt into build/ (Release). Extra arguments go to cmake;
# BUILD_TARGETS names what to build (default: everything, tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[build] configuring build/"
mkdir -p build
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > build/cmake.log 2>&1; then
  cat build/cmake.log; exit 1
fi
grep -E "bertrt: CUDA backend" build/cmake.log || true
echo "[build] compiling ${BUILD_TARGETS:-everything} with $(nproc) jobs"
# shellcheck disable=SC2086  # BUILD_TARGETS: a list of targets
ninja -C build -j"$(nproc)" ${BUILD_TARGETS:-}
echo "[build] done: build/bertrt"

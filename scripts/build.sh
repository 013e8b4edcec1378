#!/usr/bin/env bash
# Configures and builds bertrt into build/ (Release). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[build] configuring build/"
mkdir -p build
if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > build/cmake.log 2>&1; then
  cat build/cmake.log; exit 1
fi
grep -E "bertrt: CUDA backend" build/cmake.log || true
echo "[build] compiling with $(nproc) jobs"
ninja -C build -j"$(nproc)"
echo "[build] done: build/bertrt"

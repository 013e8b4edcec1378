#!/usr/bin/env bash
# Copies the built binaries (bertrt, bertrt_tests) and the shared libraries
# they link that the GPU machine lacks (Debian's oneDNN, utf8proc, spdlog,
# fmt, ...) into .carry/, which the device tool carries (`carry: [".carry"]`).
# glibc, the C++ runtime and the CUDA libraries stay behind: the GPU machine's
# are newer and compatible (and cuBLAS alone would exceed the carry limit).
# BUILD_DIR picks the build (default build; build-cuda for a CUDA build).
# The result is .carry/payload.tar.xz; scripts/device_unpack.sh unpacks it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
rm -rf .carry && mkdir -p .carry/bin .carry/lib
for bin in bertrt bertrt_tests; do
  [ -x "$build/$bin" ] || continue
  cp "$build/$bin" .carry/bin/
  ldd "$build/$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
      libcuda.so*|libcudart.so*|libcublas*|libnvidia*) ;;
      *) cp -L "$lib" .carry/lib/ ;;
    esac
  done
done
# The device tool carries at most 64 MiB with the working tree; oneDNN and
# gRPC alone are more, so the payload travels compressed and
# scripts/device_unpack.sh opens it there.
tar -cf - -C .carry bin lib | xz -9 -T"$(nproc)" > .carry/payload.tar.xz
rm -rf .carry/bin .carry/lib
du -sh .carry

#!/usr/bin/env bash
# Copies build/bertrt and the shared libraries it links that the GPU machine
# lacks (Debian's oneDNN, utf8proc, spdlog, fmt, ...) into .carry/, which the
# device tool carries (`carry: [".carry"]`). glibc and the C++ runtime stay
# behind: the GPU machine's are newer and compatible.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .carry && mkdir -p .carry/bin .carry/lib
cp build/bertrt .carry/bin/
ldd build/bertrt | awk '/=> \//{print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
    *) cp -L "$lib" .carry/lib/ ;;
  esac
done
du -sh .carry; ls .carry/lib

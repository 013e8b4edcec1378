#!/usr/bin/env bash
# Puts NVIDIA CUTLASS's headers (BSD-3-Clause) in third_party/cutlass-$VERSION,
# idempotently. The CUDA engine builds one GEMM from them: the FFN's first
# GEMM with the exact (erf) GELU fused into its epilogue, which cuBLASLt cannot
# do (its GELU epilogue is the tanh form). Debian does not package CUTLASS; its
# headers come from PyPI's nvidia-cutlass wheel, pinned by version and hash.
# Without them the build still works and runs the GELU as a kernel of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=4.2.0.0
SHA256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
DEST=third_party/cutlass-$VERSION
if [ -f "$DEST/include/cutlass/cutlass.h" ] && [ -f "$DEST/tools/util/include/cutlass/util/packed_stride.hpp" ]; then
  echo "[deps] CUTLASS $VERSION headers: present"; exit 0
fi
echo "[deps] fetching CUTLASS $VERSION headers (PyPI nvidia-cutlass)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
${PYTHON:-python3} -m pip download -q --disable-pip-version-check --no-deps \
  "nvidia-cutlass==$VERSION" -d "$tmp" 2>&1 | grep -v "WARNING: Running pip as the 'root' user" || true
wheel="$tmp/nvidia_cutlass-$VERSION-py3-none-any.whl"
[ -f "$wheel" ] || { echo "[deps] pip did not download nvidia-cutlass==$VERSION" >&2; exit 1; }
echo "$SHA256  $wheel" | sha256sum -c --quiet - || { echo "[deps] nvidia-cutlass wheel: unexpected sha256" >&2; exit 1; }
${PYTHON:-python3} - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1:]
keep = ("cutlass_library/source/include/", "cutlass_library/source/tools/util/include/")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(keep) or name.endswith("licenses/LICENSE.txt"):
            z.extract(name, out)
PY
rm -rf "$DEST.partial" && mkdir -p "$DEST.partial/tools/util"
mv "$tmp/x/cutlass_library/source/include" "$DEST.partial/include"
mv "$tmp/x/cutlass_library/source/tools/util/include" "$DEST.partial/tools/util/include"
mv "$tmp"/x/nvidia_cutlass-*.dist-info/licenses/LICENSE.txt "$DEST.partial/LICENSE.txt"
rm -rf "$DEST" && mv "$DEST.partial" "$DEST"
echo "[deps] CUTLASS $VERSION headers in $DEST"

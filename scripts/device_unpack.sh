#!/usr/bin/env bash
# On the GPU machine: unpacks .carry/payload.tar.xz (made by
# scripts/pack_for_device.sh) into .carry/bin and .carry/lib. Python's lzma
# does the work, so the machine needs no xz binary. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .carry/payload.tar.xz ] && [ ! -x .carry/bin/bertrt ]; then
  python3 -c "import tarfile; tarfile.open('.carry/payload.tar.xz').extractall('.carry')"
fi
# The parity suite's data (pack_for_device.sh PARITY_DATA=1).
if [ -f .carry/parity.tar.xz ] && [ ! -d .carry/parity ]; then
  python3 -c "import tarfile; tarfile.open('.carry/parity.tar.xz').extractall('.carry')"
fi

#!/usr/bin/env bash
# The CPU container image without a registry: a Debian bookworm root filesystem
# made by mmdebstrap from Debian's own packages (deploy/runtime-packages.txt),
# with bertrt (BERTRT_BIN, default build/bertrt) at /usr/local/bin, the default
# model at /models/all-MiniLM-L6-v2, and a user 1000 to run as: what
# deploy/Dockerfile builds, as a tarball.
#
#   bash scripts/build_rootfs.sh [OUT.tar]      # default build/bertrt-rootfs.tar
#   podman import --change 'USER=1000' --change 'ENTRYPOINT=["/usr/local/bin/bertrt"]' \
#     build/bertrt-rootfs.tar bertrt:0.1.0-cpu  # where podman can run
#
# tests/deploy/test_rootfs.py starts the server from it (chroot as user 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/bertrt-rootfs.tar}
bin=${BERTRT_BIN:-build/bertrt}
model=${BERTRT_DEFAULT_MODEL_DIR:-models/all-MiniLM-L6-v2}
[ -x "$bin" ] || { echo "error: $bin not found: build first (bash scripts/build.sh)" >&2; exit 2; }
[ -f "$model/model.safetensors" ] || { echo "error: $model not found: bash scripts/fetch_default_model.sh" >&2; exit 2; }
if ! command -v mmdebstrap >/dev/null; then
  echo "[rootfs] installing mmdebstrap"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mmdebstrap
fi
packages=$(grep -v '^#' deploy/runtime-packages.txt | paste -sd, -)
# Libraries no Debian package provides (a CUDA build's cuBLAS and CUDA
# runtime) go in beside the binary, as ldd finds them here.
# dpkg knows each file by one spelling: /lib/... or /usr/lib/... (merged /usr).
packaged() {
  local f
  for f in "$1" "$(readlink -f "$1")"; do
    dpkg -S "$f" >/dev/null 2>&1 || dpkg -S "${f#/usr}" >/dev/null 2>&1 || dpkg -S "/usr$f" >/dev/null 2>&1 &&
      return 0
  done
  return 1
}
extra_libs=()
while read -r lib; do
  packaged "$lib" || extra_libs+=("$(readlink -f "$lib")" "$lib")
done < <(ldd "$bin" | awk '/=> \//{print $3}')
# A CUDA build opens cuBLASLt at run time (dlopen: ldd does not list it):
# WITH_CUBLAS=DIR copies it from DIR (the toolkit's lib64) for the cuda variant.
if [ -n "${WITH_CUBLAS:-}" ]; then
  for lib in "$WITH_CUBLAS"/libcublasLt.so.*; do extra_libs+=("$lib"); done
fi
copy_libs=""
for lib in $(printf '%s\n' "${extra_libs[@]}" | sort -u); do
  copy_libs+="cp -a $lib \"\$1/usr/local/lib/\"; "
done
mkdir -p "$(dirname "$out")"
echo "[rootfs] debootstrapping bookworm with $packages"
# minbase: essential packages and apt only; the hooks copy bertrt and the model
# in, add the user, and drop apt's lists and caches.
mmdebstrap --variant=minbase --include="$packages" \
  --customize-hook="copy-in $bin /usr/local/bin" \
  --customize-hook="mkdir -p \"\$1/usr/local/lib\"; $copy_libs chroot \"\$1\" ldconfig" \
  --customize-hook="mkdir -p \"\$1/models\"" \
  --customize-hook="copy-in $model /models" \
  --customize-hook='chroot "$1" useradd --uid 1000 --user-group --no-create-home --shell /usr/sbin/nologin bertrt' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
  bookworm "$out" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
echo "[rootfs] $out: $(du -h "$out" | cut -f1)"

# Sourced, from the repository root, by the scripts that run on the GPU
# machine: unpacks .carry/ (scripts/device_unpack.sh), puts its libraries on
# LD_LIBRARY_PATH and makes $OUT (default /tmp/out), where results go.
bash scripts/device_unpack.sh
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"

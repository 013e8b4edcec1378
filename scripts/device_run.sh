#!/usr/bin/env bash
# The one command for the GPU machine (device tool), after
# `scripts/pack_for_device.sh` here and with `carry: [".carry"]`:
#   1. the CUDA engine's tests (parity with the CPU engine, errors);
#   2. `bertrt bench --device cuda` on a random BERT-base (fp16, seq 128);
#   3. the CPU benchmark against ONNX Runtime and PyTorch on the host CPU;
#   4. plans: CPU-built plans served on CUDA, CUDA-built plans served on the
#      CPU, and the BERT-base plan build / time-to-serving-ready benchmark.
# Everything is logged under $OUT; bench/RESULTS.md comes back as $OUT/RESULTS.md.
# STEPS picks the steps (default "1 2 3 4"), to fit a short device lease.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/device_unpack.sh
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
status=0
STEPS=${STEPS:-1 2 3 4}
want() { [[ " $STEPS " == *" $1 "* ]]; }

if want 1; then
echo "== 1. CUDA tests"
bash scripts/device_cuda.sh || status=1
fi

if want 2; then
echo "== 2. CUDA engine smoke benchmark (BERT-base, random weights)"
model=/tmp/bertrt-bench/bert-base-seqcls
[ -f $model/model.safetensors ] || python3 scripts/make_random_model.py --preset bert-base \
  --head seq-cls --num-labels 2 -o $model > /dev/null
for b in 1 8 128; do
  .carry/bin/bertrt bench $model --device cuda --precision fp16 --batch-size $b --seq-len 128 \
    --iterations 50 --warmup 10 2>&1 | tee -a "$OUT/cuda_bench.log" || status=1
done
fi

if want 3; then
echo "== 3. CPU benchmark vs ONNX Runtime and PyTorch"
bash scripts/device_cpu_bench.sh || status=1
fi

if want 4; then
echo "== 4. Plans: CPU-built plan on the GPU, GPU-built plan on the CPU, build/load timing"
bash scripts/device_plan.sh || status=1
fi
exit $status

#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/
# from scripts/pack_for_device.sh: the CPU benchmark against ONNX Runtime and
# PyTorch on that machine's host CPU, pinned to 2 cores and then on 16 threads.
# Results go to bench/RESULTS.md and $OUT.
set -euo pipefail
source scripts/device_env.sh
export PYTHONUNBUFFERED=1
.carry/bin/bertrt --version
work=/tmp/bertrt-bench && mkdir -p $work
taskset -c 0,1 python3 bench/cpu_bench.py --threads 2 --bertrt .carry/bin/bertrt --workdir $work \
  --label "(GPU machine host CPU, pinned to 2 cores)" 2>&1 | tee "$OUT/cpu_bench_2t.log"
python3 bench/cpu_bench.py --threads 16 --bertrt .carry/bin/bertrt --workdir $work \
  --label "(GPU machine host CPU, 16 threads)" 2>&1 | tee "$OUT/cpu_bench_16t.log"
cp bench/RESULTS.md "$OUT/RESULTS.md"

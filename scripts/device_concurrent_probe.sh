#!/usr/bin/env bash
# On the GPU machine: bench/probes/concurrent_halves.cc on random BERT-base,
# twice (its run-to-run spread), and `bertrt bench` on the ragged and
# 32 x 128 batches for reference. Build the probe here first, against a
# Release CUDA build (BUILD_DIR, default build-lead) and pack it:
#   BUILD_DIR=build-lead bash scripts/pack_for_device.sh
#   (cd build-lead && g++ -O2 -std=c++20 -I../include -I../src -I/usr/local/cuda/include \
#      ../bench/probes/concurrent_halves.cc -o ../.carry/probe/concurrent_halves \
#      -L/usr/local/cuda/targets/x86_64-linux/lib LINK_LIBRARIES)
# where LINK_LIBRARIES is the bertrt target's, from build-lead/build.ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
model=/tmp/bertrt-bench/bert-base-seqcls
[ -f "$model/model.safetensors" ] || python3 scripts/make_random_model.py --preset bert-base \
  --head seq-cls --num-labels 2 -o "$model" > /dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for i in 1 2; do .carry/probe/concurrent_halves "$model"; done
for args in "--batch-size 32 --lengths 16:128" "--batch-size 32 --seq-len 128"; do
  .carry/bin/bertrt bench "$model" --device cuda --precision fp16 $args --iterations 300 --warmup 30
done

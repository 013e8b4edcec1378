#!/usr/bin/env bash
# Issue 5's CPU check with the load generator on cores of its own, on the GPU
# machine's host (device tool, `carry: [".carry"]`). On the 2-core dev machine
# the HTTP load generator takes the server's cores; here `bertrt serve` and the
# in-process stack get SERVER_CPUS (default 0-1: a 2-core server) and the load
# generator LOAD_CPUS (default 2-7).
#
# Prepare here:
#   BUILD_DIR=build bash scripts/pack_for_device.sh
#   mkdir -p .carry/tok && cp models/all-MiniLM-L6-v2/{tokenizer.json,tokenizer_config.json,vocab.txt,special_tokens_map.json} .carry/tok/
# The model is all-MiniLM-L6-v2's shape with random weights and its real
# tokenizer (serve_util.sh's minilm_shape_model: the weights alone are over
# the carry limit; the time does not depend on their values). RUNS (default
# 3) runs of scripts/serve_bench.sh with `--threads THREADS` (default 1);
# their sections go to $OUT/RESULTS.md (bench/RESULTS.md plus them).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
[ -f .carry/tok/tokenizer.json ] || { echo "no .carry/tok/tokenizer.json (see the header)" >&2; exit 2; }
source scripts/serve_util.sh
model=/tmp/bertrt-bench/minilm-shape
minilm_shape_model $model .carry/tok || exit 1
status=0
for run in $(seq "${RUNS:-3}"); do
  BIN=$PWD/.carry/bin/bertrt SERVER_CPUS=${SERVER_CPUS:-0-1} LOAD_CPUS=${LOAD_CPUS:-2-7} \
    DURATION=${DURATION:-3} WARMUP=1 LABEL="MiniLM shape, load generator on its own cores, run $run of ${RUNS:-3}" \
    WORK=/tmp/serve_cpu/run$run bash scripts/serve_bench.sh $model --threads "${THREADS:-1}" 2>&1 | tee "$OUT/run$run.log" |
    grep -E '^- (saturation|half load)' || status=1
done
cp bench/RESULTS.md "$OUT/RESULTS.md"
exit $status

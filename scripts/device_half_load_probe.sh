#!/usr/bin/env bash
# Issue 5's half-load p99 on the GPU machine's CPU, in pieces (device tool,
# `carry: [".carry"]`, prepared as scripts/device_serve_cpu.sh says): a
# MiniLM-shaped model with `--threads 1`, open loop at 80 requests/s with even
# spacing (half the served saturation measured by device_serve_cpu.sh), served
# with the server on CPUs 0-1 or 0-3 and the load generator on 8-15, with 1,024
# and with 8 load-generator workers (until 9cf3d34, 1,024 meant a fresh
# connection per request; since, both reuse idle ones), next to the in-process
# stack on the same CPUs. Prints p50/p90/p99, and the server's queue and
# compute ms per request, for each, twice. Results: bench/RESULTS.md,
# "Issue 5's half-load p99 on the Xeon, in pieces".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
BIN=$PWD/.carry/bin/bertrt; m=/tmp/bertrt-bench/minilm-shape
source scripts/serve_util.sh
minilm_shape_model $m .carry/tok || exit 1
show() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['steps'][0]; sv=s['server'] or {}; print(sys.argv[2], 'p50 %.2f p90 %.2f p99 %.2f max %.2f queue %.2f compute %.2f late %s' % (s['latency_ms']['p50'], s['latency_ms']['p90'], s['latency_ms']['p99'], s['latency_ms'].get('max',0), sv.get('queue_ms',0), sv.get('compute_ms',0), s.get('late_sends')))" "$@"; }
L=(--request-rate 80 --request-distribution constant --duration-s 4 --warmup-s 1 --lengths 16:64)
for cpus in 0-1 0-3; do
  SERVER_CPUS=$cpus start_server /tmp/s.log $m --threads 1 || exit 1
  for rep in 1 2; do
    for mi in 1024 8; do
      taskset -c 8-15 $BIN bench --url "$URL" "${L[@]}" --max-inflight $mi --json /tmp/e.json > /dev/null 2>&1; show /tmp/e.json "server=$cpus served maxinflight=$mi rep$rep"
    done
    taskset -c $cpus $BIN bench $m --serve-inprocess --threads 1 "${L[@]}" --max-inflight 1024 --json /tmp/i.json > /dev/null 2>&1; show /tmp/i.json "cpus=$cpus in-process rep$rep"
  done
  kill $SERVER; wait $SERVER 2>/dev/null
done

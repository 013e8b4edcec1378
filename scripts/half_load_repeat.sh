#!/usr/bin/env bash
# Diagnoses the half-load p99 of scripts/serve_bench.sh: one `bertrt serve`,
# a short saturating step (as the sweep before the half-load step), then the
# same open-loop half-load step REPEATS times in a row on that server. If the
# first runs' p99 is high and later ones are not, the cause is something the
# server meets once (new batch shapes, whose CUDA graphs are captured at first
# use); if any run can be hit, it is something else.
#   bash scripts/half_load_repeat.sh MODEL RATE [serve flags...]
# Environment: BIN (build/bertrt), REPEATS (4), DURATION (4 s), WARMUP (1 s),
# LENGTHS (100:126 words), SEQS (1 text per request). Prints one line per run
# (the load generator's own output goes to a log in the work directory).
set -euo pipefail
MODEL=$1 RATE=$2
shift 2
BIN=${BIN:-build/bertrt}
REPEATS=${REPEATS:-4} DURATION=${DURATION:-4} WARMUP=${WARMUP:-1}
LOAD=(--duration-s "$DURATION" --warmup-s "$WARMUP" --lengths "${LENGTHS:-100:126}"
  --sequences-per-request "${SEQS:-1}")
WORK=$(mktemp -d /tmp/half_load.XXXXXX)
source "$(dirname "$0")/serve_util.sh"
start_server "$WORK/serve.log" "$MODEL" "$@" || exit 1
grep -ho "warmed up.*\|warning: warm-up.*" "$WORK/serve.log" || true
"$BIN" bench --url "$URL" --concurrency 256 --duration-s 2 --warmup-s 1 \
  --lengths "${LENGTHS:-100:126}" --sequences-per-request "${SEQS:-1}" > /dev/null 2> "$WORK/bench.log"
for r in $(seq "$REPEATS"); do
  "$BIN" bench --url "$URL" --request-rate "$RATE" --max-inflight 1024 "${LOAD[@]}" \
    --json "$WORK/half_$r.json" > /dev/null 2>> "$WORK/bench.log"
  python3 - "$WORK/half_$r.json" "$r" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
lat = s["latency_ms"]
print(f"run {sys.argv[2]}: {s['requests_per_s']:.0f} req/s, p50 {lat['p50']:.2f} ms, "
      f"p99 {lat['p99']:.2f} ms, late sends {s.get('late_sends', 0)}, errors {s['error_count']}")
EOF
done

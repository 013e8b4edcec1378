#!/usr/bin/env bash
# Served vs in-process: the same load through `bertrt serve` over HTTP and
# through the serving stack in-process (`bertrt bench --serve-inprocess`:
# tokenizer + dynamic batcher + engines, no network), so the two differ only
# by the HTTP/JSON front end. The two take turns step by step, so other work
# on the machine meets both alike. Prints and appends to bench/RESULTS.md:
#   - the concurrency sweep of both, with the served/in-process throughput
#     ratio per step and at saturation (the best step of each);
#   - open-loop steps at half the in-process saturation rate, on both, with
#     Poisson arrivals and with evenly spaced ones (perf_analyzer's default),
#     and the check: served p99 <= 2 x the engine's batch time there + 1 ms
#     (the batch time is the server's own compute time per request from
#     /metrics).
#
#   bash scripts/serve_bench.sh MODEL [--device cuda] [--precision fp16] [--threads N] [...]
#
# Extra arguments go to both `bertrt serve` and the in-process bench (engine
# and scheduler flags). Environment: BIN (build/bertrt), DURATION (5 s per
# step), WARMUP (1 s), CONCURRENCY (1,2,4,8,16,32,64), LENGTHS (16:64 words),
# RESULTS (bench/RESULTS.md; empty: do not append), WORK (a temp dir; keeps
# the JSON and the SVG chart), LABEL (added to the section's title), SEQS
# (texts per request, 1), MAX_INFLIGHT (open-loop cap on outstanding requests,
# 1024: a lower cap delays arrivals and inflates the half-load p99),
# DISTRIBUTIONS (the half-load steps' arrivals, "poisson constant"),
# SERVER_CPUS and LOAD_CPUS (taskset CPU lists: `bertrt serve` and the
# in-process stack run on SERVER_CPUS, the HTTP load generator on LOAD_CPUS,
# so that the load generator does not take the server's cores; unset: no
# pinning).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
MODEL=$1
shift
BIN=${BIN:-build/bertrt}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONCURRENCY=${CONCURRENCY:-1,2,4,8,16,32,64}
LENGTHS=${LENGTHS:-16:64}
RESULTS=${RESULTS-bench/RESULTS.md}
LABEL=${LABEL:-}
WORK=${WORK:-$(mktemp -d /tmp/serve_bench.XXXXXX)}
mkdir -p "$WORK"
SEQS=${SEQS:-1}
MAX_INFLIGHT=${MAX_INFLIGHT:-1024}
DISTRIBUTIONS=${DISTRIBUTIONS:-poisson constant}
LOAD=(--duration-s "$DURATION" --warmup-s "$WARMUP" --lengths "$LENGTHS" --sequences-per-request "$SEQS")

LOADAVG_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
source "$(dirname "$0")/serve_util.sh"
start_server "$WORK/serve.log" "$MODEL" "$@" || exit 1

# Step by step, in-process then served at each concurrency, so a change in
# what else the machine runs meets both sides alike (not one whole sweep).
IFS=, read -ra STEPS <<< "$CONCURRENCY"
for c in "${STEPS[@]}"; do
  echo "[serve_bench] concurrency $c: in-process, then served over HTTP ($URL)"
  on_cpus "${SERVER_CPUS:-}" "$BIN" bench "$MODEL" --serve-inprocess "$@" --concurrency "$c" \
    "${LOAD[@]}" --json "$WORK/inproc_c$c.json" > /dev/null
  on_cpus "${LOAD_CPUS:-}" "$BIN" bench --url "$URL" --concurrency "$c" "${LOAD[@]}" \
    --json "$WORK/http_c$c.json" > /dev/null
done
python3 - "$WORK" "${STEPS[@]}" <<'EOF_MERGE'
import json, sys
work, steps = sys.argv[1], sys.argv[2:]
for kind in ["inproc", "http"]:
    runs = [json.load(open(f"{work}/{kind}_c{c}.json")) for c in steps]
    merged = runs[0]
    merged["steps"] = [r["steps"][0] for r in runs]
    json.dump(merged, open(f"{work}/{kind}_sweep.json", "w"), indent=2)
EOF_MERGE
echo "[serve_bench] in-process sweep"
"$BIN" bench --replot "$WORK/inproc_sweep.json" --json "$WORK/inproc.json"
echo "[serve_bench] served sweep, against in-process"
"$BIN" bench --replot "$WORK/http_sweep.json" --baseline "$WORK/inproc.json" \
  --json "$WORK/http.json" --svg "$WORK/served_vs_inprocess.svg"

HALF=$(python3 -c "import json,sys; print('%.2f' % (json.load(open(sys.argv[1]))['saturation']['requests_per_s'] / 2))" "$WORK/inproc.json")
for d in $DISTRIBUTIONS; do
  echo "[serve_bench] half the in-process saturation: $HALF requests/s (open loop, $d arrivals), in-process then served"
  HALF_LOAD=(--request-rate "$HALF" --request-distribution "$d" --max-inflight "$MAX_INFLIGHT" "${LOAD[@]}")
  on_cpus "${SERVER_CPUS:-}" "$BIN" bench "$MODEL" --serve-inprocess "$@" "${HALF_LOAD[@]}" \
    --json "$WORK/inproc_half_$d.json"
  on_cpus "${LOAD_CPUS:-}" "$BIN" bench --url "$URL" "${HALF_LOAD[@]}" --json "$WORK/http_half_$d.json"
done
kill $SERVER && wait $SERVER || true
trap - EXIT
LOADAVG="$LOADAVG_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after"

python3 - "$WORK" "$MODEL" "$RESULTS" "$LABEL" "$LOADAVG" "bash scripts/serve_bench.sh $MODEL $* (DURATION=$DURATION WARMUP=$WARMUP CONCURRENCY=$CONCURRENCY LENGTHS=$LENGTHS${SERVER_CPUS:+ SERVER_CPUS=$SERVER_CPUS}${LOAD_CPUS:+ LOAD_CPUS=$LOAD_CPUS})" "${SERVER_CPUS:-}" "${LOAD_CPUS:-}" $DISTRIBUTIONS <<'EOF'
import datetime, json, os, platform, shutil, subprocess, sys
work, model, results, label, loadavg, command, server_cpus, load_cpus = sys.argv[1:9]
distributions = sys.argv[9:]
load = lambda name: json.load(open(os.path.join(work, name)))
inproc, http = load("inproc.json"), load("http.json")

def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()

gpu = ""
if shutil.which("nvidia-smi"):
    q = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                       capture_output=True, text=True)
    gpu = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else ""

sat_i, sat_h = inproc["saturation"], http["saturation"]
ratio = sat_h["sequences_per_s"] / sat_i["sequences_per_s"]

def half_load_line(d):
    hi, hh = load(f"inproc_half_{d}.json")["steps"][0], load(f"http_half_{d}.json")["steps"][0]
    compute = hh["server"]["compute_ms"] if hh["server"] else float("nan")
    bound = 2 * compute + 1
    return (f"- half load, {hh['request_rate']:g} requests/s open loop ({d} arrivals): served p99 "
            f"{hh['latency_ms']['p99']:.2f} ms (p50 {hh['latency_ms']['p50']:.2f}, {hh['requests_per_s']:.1f} "
            f"req/s, {hh['error_count']} errors, {hh.get('late_sends', 0)} late sends); engine compute per "
            f"request there {compute:.2f} ms, bound 2 x {compute:.2f} + 1 = {bound:.2f} ms: "
            f"{'met' if hh['latency_ms']['p99'] <= bound else 'NOT met'}; in-process p99 at the same rate "
            f"{hi['latency_ms']['p99']:.2f} ms")
rows = []
by_label = {s["label"]: s for s in inproc["steps"]}
for s in http["steps"]:
    i = by_label[s["label"]]
    srv = s["server"] or {"queue_ms": float("nan"), "compute_ms": float("nan")}
    rows.append(f"| {s['label']} | {i['sequences_per_s']:.1f} | {i['latency_ms']['p99']:.2f} | "
                f"{s['sequences_per_s']:.1f} | {s['latency_ms']['p50']:.2f} | {s['latency_ms']['p99']:.2f} | "
                f"{srv['queue_ms']:.2f} | {srv['compute_ms']:.2f} | {s['error_count']} | "
                f"{s['sequences_per_s'] / i['sequences_per_s']:.3f} |")
cores = os.cpu_count()
if server_cpus or load_cpus:
    pinning = (f"the server and the in-process stack run on CPUs {server_cpus or 'any'}, the HTTP "
               f"load generator on CPUs {load_cpus or 'any'} (taskset)")
else:
    pinning = ("the load generator runs on the same machine as the server" +
               (f" and shares its {cores} cores with it" if cores and cores <= 4 else ""))
text = f"""
## Served (HTTP) vs in-process serving stack — {inproc['model']} on {inproc['device']} {inproc['precision']}{' ' + label if label else ''} ({datetime.date.today()})

- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC
- machine: {cpu()}, {cores} cores{', GPU ' + gpu if gpu else ''}; load average {loadavg} (other work on the machine competes for the cores when it exceeds the bench's own)
- command: `{command}`
- load: closed loop, one request of {inproc['load']['sequences_per_request']} text(s) per worker outstanding, in-process and served step by step in turn; texts of {inproc['texts'].get('words', '')} words drawn from common English words (seed {inproc['load']['seed']}); {inproc['load']['duration_s']:g} s measured after {inproc['load']['warmup_s']:g} s warm-up per step; same scheduler flags on both
- {pinning}; the in-process run has no HTTP client or server threads to feed, so it is the upper bound the front end is compared against
- columns: in-process and served sequences/s and latency (ms, from send to answer); queue/compute: the server's own mean per request from /metrics over the same window

| step | in-process seq/s | in-process p99 | served seq/s | served p50 | served p99 | queue ms | compute ms | errors | served / in-process |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
""" + "\n".join(rows) + f"""

- saturation (best step of each): served {sat_h['sequences_per_s']:.1f} seq/s ({sat_h['label']}) vs in-process {sat_i['sequences_per_s']:.1f} seq/s ({sat_i['label']}): **{ratio:.3f}** (target >= 0.95: {'met' if ratio >= 0.95 else 'NOT met'})
""" + "".join(half_load_line(d) + "\n" for d in distributions)
print(text)
if results:
    with open(results, "a") as f:
        f.write(text)
    print(f"[serve_bench] appended to {results}; JSON and chart in {work}")
EOF

#!/usr/bin/env bash
# A/B timing on the GPU machine: `bertrt bench --device cuda --precision fp16`
# on random BERT-base (seq-cls) for each case, each variant in turn, the
# whole round REPEATS times (interleaved, so drift hits all variants alike).
# A variant is "label=command prefix", e.g.
#   "small=.carry/bin/bertrt" "cublaslt=env BERTRT_SMALL_GEMM=0 .carry/bin/bertrt"
# Each round starts one variant later than the last (a variant run always
# last or first would carry any drift within a round). Prints one line per
# case: the median ms of each variant per round, in the order run; then a
# line with the median over rounds of each variant and its ratio to the first.
#   bash scripts/device_ab.sh VARIANT... [-- CASE...]   (CASE: "name:bench args")
set -uo pipefail
variants=() cases=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do variants+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=("b1:--batch-size 1 --seq-len 128" "b8:--batch-size 8 --seq-len 128"
  "b32:--batch-size 32 --seq-len 128" "b128:--batch-size 128 --seq-len 128"
  "ragged:--batch-size 32 --lengths 16:128")
model=${MODEL:-/tmp/bertrt-bench/bert-base-seqcls}
[ -f "$model/model.safetensors" ] || python3 scripts/make_random_model.py --preset bert-base \
  --head seq-cls --num-labels 2 -o "$model" > /dev/null
for c in "${cases[@]}"; do
  name=${c%%:*} args=${c#*:}
  line="$name"
  n=${#variants[@]}
  for rep in $(seq "${REPEATS:-2}"); do
    for i in $(seq 0 $((n - 1))); do
      v=${variants[$(((i + rep - 1) % n))]}
      label=${v%%=*} cmd=${v#*=}
      ms=$($cmd bench "$model" --device cuda --precision fp16 $args --iterations "${ITERATIONS:-300}" \
        --warmup 30 --json 2>/dev/null | python3 -c 'import json, sys; print("%.4f" % json.load(sys.stdin)["median_ms"])')
      line+="  $label ${ms:-error}"
    done
  done
  echo "$line"
  # The median of each variant over the rounds, and its ratio to the first variant's.
  python3 - "$line" "${variants[@]%%=*}" <<'PY'
import statistics, sys
words, labels = sys.argv[1].split()[1:], sys.argv[2:]
runs = {}
for label, ms in zip(words[::2], words[1::2]):
    if ms != "error":
        runs.setdefault(label, []).append(float(ms))
first = statistics.median(runs[labels[0]]) if labels[0] in runs else None
out = []
for label in labels:
    if label not in runs:
        out.append(f"{label} error")
        continue
    m = statistics.median(runs[label])
    out.append(f"{label} {m:.4f}" + (f" ({m / first:.3f}x)" if first else ""))
print("  medians: " + "  ".join(out))
PY
done

#!/usr/bin/env bash
# Plans on the GPU machine (called by scripts/device_run.sh): for each tiny
# test model, a plan built on the CPU served with --device cuda must equal the
# HF directory served with --device cuda, and a plan built with --device cuda
# (tuned on this GPU, fp16) served on the CPU must match the CPU reference
# (cosine >= 0.999, same argmax); then the BERT-base build and
# time-to-serving-ready benchmark on the GPU (appended to bench/RESULTS.md).
# Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
B=${BERTRT_BIN:-.carry/bin/bertrt}
work=/tmp/bertrt-plans
mkdir -p "$OUT" "$work"
status=0
texts='{"text": "hello world"}
{"text": "the quick brown fox", "text_pair": "jumps over the lazy dog"}
{"text": "今天天气很好，东京とモスクワ"}'

compare() {  # compare WANT GOT MODE(exact|close)
  python3 - "$@" <<'PY'
import json, math, sys
want = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
assert len(want) == len(got) == 3, (len(want), len(got))
if sys.argv[3] == "exact":
    assert want == got, "outputs differ"
    sys.exit(0)
def flat(x):
    return [v for y in x for v in flat(y)] if isinstance(x, list) else [x]
for w, g in zip(want, got):
    for key in w:
        if key == "label":
            assert w[key] == g[key], (key, w[key], g[key])
            continue
        a, b = flat(w[key]), flat(g[key])
        cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
        assert cos >= 0.999, (key, cos)
PY
}

for m in seq_cls token_cls qa sentence_mean base; do
  dir=tests/data/models/$m
  log="$OUT/plan_$m.log"
  {
    $B build "$dir" -o "$work/$m-cpu.plan" &&
    $B build "$dir" -o "$work/$m-cuda.plan" --device cuda &&
    echo "$texts" | $B run "$dir" --device cuda --precision fp32 > "$work/$m.dir.cuda.jsonl" &&
    echo "$texts" | $B run "$work/$m-cpu.plan" --device cuda --precision fp32 > "$work/$m.cpuplan.cuda.jsonl" &&
    compare "$work/$m.dir.cuda.jsonl" "$work/$m.cpuplan.cuda.jsonl" exact &&
    echo "$texts" | $B run "$dir" > "$work/$m.dir.cpu.jsonl" &&
    echo "$texts" | $B run "$work/$m-cuda.plan" > "$work/$m.cudaplan.cpu.jsonl" &&
    compare "$work/$m.dir.cpu.jsonl" "$work/$m.cudaplan.cpu.jsonl" close &&
    echo "$texts" | $B run "$work/$m-cpu.plan" --device cuda 2>&1 >/dev/null | grep -q "holds no GEMM choices"
  } > "$log" 2>&1 && echo "plan $m: OK" || { echo "plan $m: FAILED (see $log)"; tail -20 "$log"; status=1; }
done

python3 bench/plan_bench.py --bin "$B" --device cuda --repeats 5 2>&1 | tee "$OUT/plan_bench.log" || status=1
cp bench/RESULTS.md "$OUT/RESULTS.md"
exit $status

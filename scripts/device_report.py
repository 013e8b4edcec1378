#!/usr/bin/env python3
"""Reports of scripts/device_serve.sh, printed and appended to bench/RESULTS.md:
  multigpu  step 3: served saturation throughput with one GPU and with every GPU
            (`bertrt bench --url --json` files), the speed-up, and each GPU's share
            of the sequences (the server's /metrics);
  perf      step 5: `bertrt bench` medians with the GEMM algorithms timed
            (BERTRT_GEMM_TUNING=1) and with the heuristic's first answer, interleaved
            over two repetitions, and the per-operation profiles at batch 1 and 128."""
import argparse
import datetime
import json
import re
import statistics
import subprocess
from pathlib import Path


def gpu_names():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip().splitlines()
    except FileNotFoundError:
        return []


def emit(lines, results):
    text = "\n".join(lines) + "\n"
    print(text)
    if results:
        with open(results, "a") as f:
            f.write("\n" + text)


def shares(out, tag):
    text = (out / f"metrics_{tag}.txt").read_text()
    seqs = {m.group(1): float(m.group(2)) for m in
            re.finditer(r'bertrt_instance_sequences_total\{[^}]*instance="([^"]+)"\} (\S+)', text)}
    total = sum(seqs.values()) or 1.0
    return ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in sorted(seqs.items()))


def multigpu(a):
    tags = [("1", "gpus_0"), (str(len(a.gpus.split(","))), "gpus_" + a.gpus.replace(",", "_"))]
    rows, base = [], None
    for n, tag in tags:
        r = json.loads((a.out / f"multigpu_{tag}.json").read_text())
        best = r["saturation"]
        step = next(s for s in r["steps"] if s.get("label") == best["label"])
        base = base or best["sequences_per_s"]
        rows.append((n, best["label"], best["sequences_per_s"], best["requests_per_s"],
                     best["sequences_per_s"] / base, step["latency_ms"]["p99"], shares(a.out, tag)))
    gpu = gpu_names()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    lines = [
        f"## Multi-GPU serving: one instance per GPU ({datetime.date.today().isoformat()})", "",
        f"- Machine: {len(gpu)} x {gpu[0] if gpu else '?'}; CPU {cpu}; the load generator runs "
        "on the same host.",
        f"- Command: `{a.command}` (BERT-base random weights, seq-cls, fp16, texts of 100..126 "
        "words, 8 per request, HTTP KServe v2 JSON)", "",
        "| GPUs | saturating step | seq/s | req/s | speed-up | p99 ms | sequences per instance |",
        "|---|---|---|---|---|---|---|"]
    for n, label, sps, rps, ratio, p99, share in rows:
        lines.append(f"| {n} | {label} | {sps:,.0f} | {rps:,.0f} | {ratio:.2f}x | {p99:.1f} "
                     f"| {share} |")
    emit(lines, a.results)


def perf(a):
    gpu = gpu_names()
    lines = [f"## CUDA engine: timed GEMM algorithms, and where batch 128 spends its time "
             f"({datetime.date.today().isoformat()})", "",
             f"- Machine: {gpu[0] if gpu else '?'}; BERT-base random weights, seq-cls, fp16, seq 128, "
             "ids in host memory to logits in host memory, CUDA graphs on.",
             f"- Command: `{a.command}`; each cell is the median of 100 runs, the two settings "
             "interleaved, two repetitions (both shown).", "",
             "| batch | heuristic's first (ms) | timed choice (ms) | ratio | timed seq/s |",
             "|---|---|---|---|---|"]
    for b in (1, 8, 128):
        med = {}
        for t in (0, 1):
            med[t] = [json.loads((a.out / f"perf_b{b}_t{t}_r{r}.json").read_text())["median_ms"]
                      for r in (1, 2)]
        m0, m1 = statistics.mean(med[0]), statistics.mean(med[1])
        lines.append(f"| {b} | {med[0][0]:.3f} / {med[0][1]:.3f} | {med[1][0]:.3f} / {med[1][1]:.3f} "
                     f"| {m0 / m1:.3f}x | {b / (m1 / 1000):,.0f} |")
    for b in (1, 128):
        path = a.out / f"profile_b{b}.json"
        if not path.exists():
            continue
        p = json.loads(path.read_text())["profile"]
        lines += ["", f"Batch {b}, per operation (eager, CUDA events, synchronized after each; "
                  f"mean of {p['runs']} forwards):", "",
                  "| op | calls | ms | share | TFLOP/s |", "|---|---|---|---|---|"]
        for op in p["ops"]:
            share = 100 * op["ms_per_forward"] / p["sum_of_ops_ms"]
            tf = f"{op['tflops']:.0f}" if op["tflops"] else ""
            lines.append(f"| {op['op']} | {op['calls_per_forward']} | {op['ms_per_forward']:.3f} "
                         f"| {share:.1f}% | {tf} |")
        lines += ["", f"GEMMs {p['gemm_ms']:.3f} ms + attention {p['attention_ms']:.3f} ms of a "
                  f"{p['graph_median_ms']:.3f} ms forward with graphs: "
                  f"{p['outside_gemm_and_attention_ms']:.3f} ms outside them."]
    emit(lines, a.results)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", choices=["multigpu", "perf"])
    ap.add_argument("--out", required=True, type=Path, help="the device run's $OUT")
    ap.add_argument("--gpus", help="multigpu: the list used for every GPU, e.g. 0,1")
    ap.add_argument("--results", type=Path, help="append to this file (bench/RESULTS.md)")
    ap.add_argument("--command", default="", help="the command to quote")
    a = ap.parse_args()
    if a.report == "multigpu" and not a.gpus:
        ap.error("multigpu needs --gpus")
    multigpu(a) if a.report == "multigpu" else perf(a)


if __name__ == "__main__":
    main()

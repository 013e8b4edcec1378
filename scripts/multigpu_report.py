#!/usr/bin/env python3
"""Summarises scripts/device_serve.sh step 3: served saturation throughput with
one GPU and with every GPU (from `bertrt bench --url --json` files), the
speed-up, and each GPU's share of the batches (from the server's /metrics);
prints a table and appends it to bench/RESULTS.md."""
import argparse
import datetime
import json
import re
import subprocess
from pathlib import Path


def load(out, tag):
    return json.loads((out / f"multigpu_{tag}.json").read_text())


def shares(out, tag):
    text = (out / f"metrics_{tag}.txt").read_text()
    seqs = {m.group(1): float(m.group(2)) for m in
            re.finditer(r'bertrt_instance_sequences_total\{[^}]*instance="([^"]+)"\} (\S+)', text)}
    total = sum(seqs.values()) or 1.0
    return ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in sorted(seqs.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--gpus", required=True, help="the list used for every GPU, e.g. 0,1")
    ap.add_argument("--results", type=Path)
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    tags = [("1", "gpus_0"), (str(len(a.gpus.split(","))), "gpus_" + a.gpus.replace(",", "_"))]
    rows, base = [], None
    for n, tag in tags:
        r = load(a.out, tag)
        best = r["saturation"]
        step = next(s for s in r["steps"] if s.get("label") == best["label"]) if r.get("steps") else {}
        if base is None:
            base = best["sequences_per_s"]
        rows.append((n, best["label"], best["sequences_per_s"], best["requests_per_s"],
                     best["sequences_per_s"] / base, step.get("latency_ms", {}).get("p99", float("nan")),
                     shares(a.out, tag)))
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines = [
        f"## Multi-GPU serving: one instance per GPU ({datetime.date.today().isoformat()})",
        "",
        f"- Machine: {len(gpu)} x {gpu[0] if gpu else '?'}; CPU {cpu}; the load generator runs on the same host.",
        f"- Command: `{a.command}` (BERT-base random weights, seq-cls, fp16, texts of 100..126 words, 8 per request, HTTP KServe v2 JSON)",
        "",
        "| GPUs | saturating step | seq/s | req/s | speed-up | p99 ms | sequences per instance |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, label, sps, rps, ratio, p99, share in rows:
        lines.append(f"| {n} | {label} | {sps:,.0f} | {rps:,.0f} | {ratio:.2f}x | {p99:.1f} | {share} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()

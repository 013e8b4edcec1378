#!/usr/bin/env python3
"""Summarises scripts/device_serve.sh step 5: `bertrt bench` medians with the
GEMM algorithms timed (BERTRT_GEMM_TUNING=1) and with the heuristic's first
answer (=0), interleaved over two repetitions, and the per-operation profiles
at batch 1 and 128; prints it and appends it to bench/RESULTS.md."""
import argparse
import datetime
import json
import statistics
import subprocess
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--results", type=Path)
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
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
    text = "\n".join(lines) + "\n"
    print(text)
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()

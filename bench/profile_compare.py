#!/usr/bin/env python3
"""Side by side: the per-operation profiles of several `bertrt bench --profile --json FILE`
runs, as one Markdown table (ms per forward, each operation's time inside the CUDA graph),
with each case's graph median and, for two cases, the ratio of the first to the second.

  python3 bench/profile_compare.py ragged.json b32.json [more.json ...]
"""
import argparse
import json


def case_name(run):
    shape = run.get("lengths") or run["seq_len"]
    return f"{run['batch_size']} x {shape} ({run['total_tokens']} tokens)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("runs", nargs="+", help="`bertrt bench --profile --json FILE` outputs")
    args = ap.parse_args()
    runs = []
    for path in args.runs:
        with open(path) as f:
            run = json.load(f)
        if "profile" not in run:
            ap.error(f"{path}: no profile (run bertrt bench with --profile)")
        runs.append(run)
    ops = []
    for run in runs:
        for op in run["profile"]["ops"]:
            if op["op"] not in ops:
                ops.append(op["op"])
    ratio = len(runs) == 2
    header = ["op"] + [case_name(r) for r in runs] + (["ratio"] if ratio else [])
    print("| " + " | ".join(header) + " |")
    print("|---" + "|---:" * (len(header) - 1) + "|")

    def row(label, values):
        cells = [f"{v:.3f}" if v is not None else "" for v in values]
        if ratio:
            a, b = values
            cells.append(f"{a / b:.3f}" if a is not None and b else "")
        print(f"| {label} | " + " | ".join(cells) + " |")

    for name in ops:
        values = []
        for run in runs:
            match = [o for o in run["profile"]["ops"] if o["op"] == name]
            values.append(match[0]["ms_per_forward"] if match else None)
        row(name, values)
    row("**sum of operations**", [r["profile"]["sum_of_ops_ms"] for r in runs])
    row("**forward, graph median** (ids in host memory to outputs in host memory)",
        [r["median_ms"] for r in runs])
    row("outside the operations (copies, launch, host)",
        [r["median_ms"] - r["profile"]["sum_of_ops_ms"] for r in runs])


if __name__ == "__main__":
    main()

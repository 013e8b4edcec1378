#!/usr/bin/env python3
"""Kernel-by-kernel durations from an `ncu --csv` run, side by side for several runs.

On the GPU machine, one CSV per case, e.g.:

  ncu --metrics gpu__time_duration.sum --csv --launch-count 300 \
      $PWD/.carry/bin/bertrt bench MODEL --device cuda --precision fp16 \
      --batch-size 32 --lengths 16:128 --iterations 1 --warmup 0 > ragged.csv
  python3 bench/ncu_kernels.py ragged.csv b32.csv

Prints, per kernel (name and grid; the weight conversions at load are kernels
too), the number of launches and their total and median microseconds in each
run. ncu runs every kernel alone, at base clocks and with caches flushed, so
absolute times are inflated; what this is for is the ratio between cases.
"""
import collections
import csv
import statistics
import sys


def load(path):
    """{(kernel, grid): [us, ...]} from one ncu CSV."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) > 10]
    if not rows:
        sys.exit(f"{path}: no ncu CSV rows (was it written with --csv?)")
    header, rows = rows[0], rows[1:]
    col = {name: header.index(name) for name in
           ("Kernel Name", "Grid Size", "Metric Name", "Metric Value")}
    kernels = collections.defaultdict(list)
    for r in rows:
        if r[col["Metric Name"]] != "gpu__time_duration.sum":
            continue
        name = r[col["Kernel Name"]].split("(")[0][:70]
        ns = float(r[col["Metric Value"]].replace(",", ""))
        kernels[(name, r[col["Grid Size"]])].append(ns / 1000)
    return kernels


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = [load(p) for p in sys.argv[1:]]
    keys = sorted({k for run in runs for k in run},
                  key=lambda k: -max(sum(run.get(k, [])) for run in runs))
    header = "| kernel | grid | " + " | ".join(
        f"{p}: n, total us, median us" for p in sys.argv[1:]) + " |"
    print(header)
    print("|---|---|" + "---:|" * len(runs))
    for name, grid in keys:
        cells = []
        for run in runs:
            us = run.get((name, grid), [])
            cells.append(f"{len(us)}, {sum(us):.1f}, {statistics.median(us):.2f}" if us else "")
        print(f"| {name} | {grid} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

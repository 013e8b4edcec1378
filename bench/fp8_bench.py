#!/usr/bin/env python3
"""FP8 and INT8 on the GPU against our fp16 and PyTorch fp16, in one run on the GPU machine
(issue 46).

Random BERT-base and BERT-large (seq-cls) from scripts/make_random_model.py. For each, an fp8
and an int8 plan are built once (`bertrt build --precision fp8|int8 --device cuda`: calibrated
on the CPU on the built-in corpus, fp8 max per tensor, int8 per token, every Linear in 8 bits,
the accuracy report stored), and the plans and the fp16 model are timed with `bertrt bench
--device cuda --json` in interleaved rounds (each round
runs every variant; --rounds of them; the median of the rounds' medians), beside PyTorch eager
fp16 (bench/cuda_bench.py's anchor) in the same run. Cases: the issue's goals: BERT-base s128
at batch 1 and 128, BERT-large s384 at batch 256.

Also prints each plan's load check (its GPU answers against the CPU engine its report was
measured on) and the report itself. Appends the table to --results.

  python3 bench/fp8_bench.py --bertrt .carry/bin/bertrt --results bench/RESULTS.md
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_bench import Torch, log, make_model  # noqa: E402

CASES = [("bert-base", 1, 128), ("bert-base", 128, 128), ("bert-large", 256, 384)]


# The variants timed: (name, precision, environment). "fp8" and "int8" are the engines as they
# run (the LayerNorm's and, fp8, the GELU's passes making the next 8-bit GEMM's input); the
# "unfused" ones their A/B, a quantization pass before each 8-bit GEMM
# (BERTRT_FUSED_QUANTIZATION=0).
UNFUSED = {"BERTRT_FUSED_QUANTIZATION": "0"}
VARIANTS = [("fp16", "fp16", {}), ("fp8", "fp8", {}), ("fp8 unfused", "fp8", UNFUSED),
            ("int8", "int8", {}), ("int8 unfused", "int8", UNFUSED)]
A_B = ["fp8 unfused", "int8 unfused"]
FORMATS = ("fp8", "int8")


def bench(binary, model, precision, batch, seq, iterations, env=None):
    cmd = [binary, "bench", model, "--device", "cuda", "--precision", precision, "--batch-size",
           str(batch), "--seq-len", str(seq), "--iterations", str(iterations), "--warmup", "20",
           "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["median_ms"], proc.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--workdir", default="/tmp/bertrt-bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--results")
    ap.add_argument("--no-large", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    presets = ["bert-base"] + ([] if args.no_large else ["bert-large"])
    models, plans, reports = {}, {}, {}
    for preset in presets:
        models[preset] = make_model(preset, args.workdir)
        for fmt in FORMATS:
            plans[preset, fmt] = os.path.join(args.workdir, f"{preset}.{fmt}.plan")
            log(f"{preset}: building the {fmt} plan")
            # Random weights' logits are ill-conditioned: 8 bits' own error on them fails the
            # default accuracy budget, which would keep some Linears in 16 bits (and the
            # build's verification, printed, kept by --force). A budget of zeros keeps every
            # GEMM in 8 bits, the path whose speed this measures.
            proc = subprocess.run([args.bertrt, "build", models[preset], "--precision", fmt,
                                   "--device", "cuda", "--force", "--accuracy-budget",
                                   "cosine_mean=0,cosine_min=0,top10=0,argmax=0", "-o",
                                   plans[preset, fmt]], capture_output=True, text=True,
                                  timeout=1200)
            if proc.returncode != 0:
                sys.exit(f"{fmt} build of {preset} failed: {proc.stderr[-3000:]}")
            reports[preset, fmt] = [l for l in (proc.stdout + proc.stderr).splitlines()
                                    if l.startswith(("quantize", "verify", "  ", "warning"))]
            print("\n".join(reports[preset, fmt]), flush=True)
    rows = []
    for preset, batch, seq in CASES:
        if preset not in models:
            continue
        times = {name: [] for name, _, _ in VARIANTS}
        checks = {}
        for r in range(args.rounds):
            for name, precision, env in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                target = plans[preset, precision] if precision in FORMATS else models[preset]
                ms, err = bench(args.bertrt, target, precision, batch, seq, args.iterations, env)
                times[name].append(ms)
                for line in err.splitlines():
                    if "check:" in line:
                        checks[precision] = line
        check = " / ".join(checks[f] for f in FORMATS if f in checks)
        torch = Torch(models[preset])
        torch_ms, _ = torch.time(torch.model, torch.inputs(batch, seq), 10, args.iterations)
        del torch
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append((preset, batch, seq, med, torch_ms, check))
        log(f"{preset} b{batch} s{seq}: "
            + ", ".join(f"{name} {med[name]:.3f} ms" for name, _, _ in VARIANTS)
            + f", PyTorch {torch_ms:.3f} ms; {check}")
    table = ["| model | batch x seq | bertrt fp16 ms | bertrt fp8 ms | fp8 / fp16 speed-up | "
             + "".join(f"{name} ms | " for name in A_B)
             + "fp8 seq/s | bertrt int8 ms | int8 / fp16 speed-up | "
             + "PyTorch eager fp16 ms | fp8 vs PyTorch |",
             "|---|---|" + "---:|" * (8 + len(A_B))]
    for preset, batch, seq, med, torch_ms, _ in rows:
        table.append(f"| {preset} | {batch}x{seq} | {med['fp16']:.3f} | {med['fp8']:.3f} | "
                     f"{med['fp16'] / med['fp8']:.2f}x | "
                     + "".join(f"{med[name]:.3f} | " for name in A_B)
                     + f"{batch / med['fp8'] * 1000:,.0f} | {med['int8']:.3f} | "
                     f"{med['fp16'] / med['int8']:.2f}x | "
                     f"{torch_ms:.3f} | {torch_ms / med['fp8']:.2f}x |")
    print("\n".join(table))
    if args.results:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
        section = [f"\n## FP8 and INT8 on the GPU against fp16 and PyTorch (issue 46), {stamp}, "
                   f"{gpu}\n",
                   f"`python {' '.join(sys.argv)}`: random weights, 8-bit plans built with the "
                   f"default calibration (built-in corpus; fp8 max per tensor, int8 per token) "
                   f"and every Linear in 8 bits (a budget of zeros: no fallback); medians of "
                   f"{args.rounds} interleaved rounds of {args.iterations} runs (ids in host "
                   f"memory to logits in host memory); PyTorch eager fp16 (SDPA) in the same "
                   f"run.\n",
                   *table, "", "8-bit plans' reports and load checks:"]
        for (preset, fmt), report in reports.items():
            section += [f"- {preset} {fmt}: " + " / ".join(l.strip() for l in report)]
        section += [f"- {p} b{b}: {c}" for p, b, _, _, _, c in rows if c]
        with open(args.results, "a", encoding="utf-8") as f:
            f.write("\n".join(section) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""FP8 on the GPU against our fp16 and PyTorch fp16, in one run on the GPU machine (issue 46).

Random BERT-base and BERT-large (seq-cls) from scripts/make_random_model.py. For each, an fp8
plan is built once (`bertrt build --precision fp8 --device cuda`: calibrated on the CPU on the
built-in corpus, max per tensor, every Linear in fp8, the accuracy report stored), and the
fp8 plan and the fp16 model are timed with `bertrt bench --device cuda --json` in
interleaved rounds (each round
runs every variant; --rounds of them; the median of the rounds' medians), beside PyTorch eager
fp16 (bench/cuda_bench.py's anchor) in the same run. Cases: the issue's goals: BERT-base s128
at batch 1 and 128, BERT-large s384 at batch 256.

Also prints each fp8 plan's load check (its GPU answers against the CPU emulation its report
was measured on) and the report itself. Appends the table to --results.

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


# The variants timed: (name, precision, environment). "fp8" is the engine with every
# quantization fused (Tuning::fused_fp8_quantization, off by default until measured); the
# others are its A/B: "fp8 GELU pass" with the FFN-in GEMM's GELU in a pass of its own that
# also makes the FFN-out GEMM's E4M3 input (no Fp8BiasGeluGemm), "fp8 unfused" with a
# GELU pass and a quantization pass after it (Tuning::fused_fp8_quantization off).
FUSED = {"BERTRT_FUSED_FP8_QUANTIZATION": "1"}  # (off by default until measured)
VARIANTS = [("fp16", "fp16", {}), ("fp8", "fp8", FUSED),
            ("fp8 GELU pass", "fp8", {**FUSED, "BERTRT_FUSED_GELU_GEMM": "0"}),
            ("fp8 unfused", "fp8", {"BERTRT_FUSED_GELU_GEMM": "0",
                                    "BERTRT_FUSED_FP8_QUANTIZATION": "0"})]
A_B = [name for name, _, _ in VARIANTS[2:]]


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
        plans[preset] = os.path.join(args.workdir, f"{preset}.fp8.plan")
        log(f"{preset}: building the fp8 plan")
        # Random weights' logits are ill-conditioned: fp8's own error on them fails the
        # default accuracy budget, which would keep some Linears in 16 bits (and the build's
        # verification, printed, kept by --force). A budget of zeros keeps every GEMM in fp8,
        # the path whose speed this measures.
        proc = subprocess.run([args.bertrt, "build", models[preset], "--precision", "fp8",
                               "--device", "cuda", "--force", "--accuracy-budget",
                               "cosine_mean=0,cosine_min=0,top10=0,argmax=0", "-o", plans[preset]],
                              capture_output=True,
                              text=True, timeout=1200)
        if proc.returncode != 0:
            sys.exit(f"fp8 build of {preset} failed: {proc.stderr[-3000:]}")
        reports[preset] = [l for l in (proc.stdout + proc.stderr).splitlines()
                           if l.startswith(("quantize", "verify", "  ", "warning"))]
        print("\n".join(reports[preset]), flush=True)
    rows = []
    for preset, batch, seq in CASES:
        if preset not in models:
            continue
        times = {name: [] for name, _, _ in VARIANTS}
        check = ""
        for r in range(args.rounds):
            for name, precision, env in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                target = plans[preset] if precision == "fp8" else models[preset]
                ms, err = bench(args.bertrt, target, precision, batch, seq, args.iterations, env)
                times[name].append(ms)
                check = next((l for l in err.splitlines() if "check:" in l), check)
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
             + "fp8 seq/s | PyTorch eager fp16 ms | fp8 vs PyTorch |",
             "|---|---|" + "---:|" * (6 + len(A_B))]
    for preset, batch, seq, med, torch_ms, _ in rows:
        table.append(f"| {preset} | {batch}x{seq} | {med['fp16']:.3f} | {med['fp8']:.3f} | "
                     f"{med['fp16'] / med['fp8']:.2f}x | "
                     + "".join(f"{med[name]:.3f} | " for name in A_B)
                     + f"{batch / med['fp8'] * 1000:,.0f} | "
                     f"{torch_ms:.3f} | {torch_ms / med['fp8']:.2f}x |")
    print("\n".join(table))
    if args.results:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
        section = [f"\n## FP8 on the GPU against fp16 and PyTorch (issue 46), {stamp}, {gpu}\n",
                   f"`python {' '.join(sys.argv)}`: random weights, fp8 plans built with the "
                   f"default calibration (built-in corpus, max per tensor) and every Linear "
                   f"in fp8 (a budget of zeros: no fallback); medians of "
                   f"{args.rounds} interleaved rounds of {args.iterations} runs (ids in host "
                   f"memory to logits in host memory); PyTorch eager fp16 (SDPA) in the same run.\n",
                   *table, "", "fp8 plans' reports and load checks:"]
        for preset in presets:
            section += [f"- {preset}: " + " / ".join(l.strip() for l in reports[preset])]
        section += [f"- {p} b{b}: {c}" for p, b, _, _, _, c in rows if c]
        with open(args.results, "a", encoding="utf-8") as f:
            f.write("\n".join(section) + "\n")


if __name__ == "__main__":
    main()

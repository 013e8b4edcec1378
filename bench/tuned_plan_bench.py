#!/usr/bin/env python3
"""GEMM choices stored in a plan vs cuBLASLt's heuristic, on the GPU.

Builds an fp16 plan with `bertrt build --device cuda` (which times the GEMMs of
every batch size up to --max-batch-tokens and stores the fastest cuBLASLt
algorithms), then times `bertrt bench` on the plan and on the Hugging Face
directory it came from (whose engine takes the heuristic's first answer), the
two interleaved case by case, --repeats times. Prints a table and appends it,
with the build time and the number of stored choices, to bench/RESULTS.md.

  python3 bench/tuned_plan_bench.py --bin .carry/bin/bertrt [--large] [--repeats 2]
"""
import argparse
import datetime
import json
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

BASE_CASES = [("b1", ["--batch-size", "1", "--seq-len", "128"]),
              ("b8", ["--batch-size", "8", "--seq-len", "128"]),
              ("b32", ["--batch-size", "32", "--seq-len", "128"]),
              ("b128", ["--batch-size", "128", "--seq-len", "128"]),
              ("ragged 32 x 16..128", ["--batch-size", "32", "--lengths", "16:128"])]
LARGE_CASES = [("large s384 b256", ["--batch-size", "256", "--seq-len", "384"])]


def make_model(preset, path):
    if not (path / "model.safetensors").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts/make_random_model.py"), "--preset",
                        preset, "--head", "seq-cls", "--num-labels", "2", "--dtype", "f16",
                        "-o", str(path)], check=True, stdout=subprocess.DEVNULL)


def build(binary, model, plan, max_batch_tokens):
    cmd = [binary, "build", str(model), "-o", str(plan), "--device", "cuda",
           "--precision", "fp16"]
    if max_batch_tokens:
        cmd += ["--max-batch-tokens", str(max_batch_tokens)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bertrt build failed:\n{proc.stderr}")
    tune = next((l.split(": ", 1)[-1] for l in proc.stderr.splitlines()
                 if l.startswith("[build] tune done")), "no tune stage")
    return seconds, tune


def bench(binary, model, args, iterations):
    proc = subprocess.run([binary, "bench", str(model), "--device", "cuda", "--precision", "fp16",
                           "--iterations", str(iterations), "--warmup", str(max(3, iterations // 10)),
                           "--json"] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bertrt bench failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build/bertrt"))
    ap.add_argument("--workdir", default="/tmp/bertrt-bench")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--large", action="store_true",
                    help="also BERT-large at seq 384, batch 256 (plan timed up to 98,304 tokens)")
    ap.add_argument("--results", default=str(ROOT / "bench/RESULTS.md"))
    args = ap.parse_args()
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)

    suites = [("BERT-base", "bert-base", 0, BASE_CASES, 200)]
    if args.large:
        suites.append(("BERT-large", "bert-large", 256 * 384, LARGE_CASES, 10))
    builds, rows = [], []
    for name, preset, max_tokens, cases, iterations in suites:
        model = work / f"{preset}-seqcls-f16"
        make_model(preset, model)
        plan = work / f"{preset}-tuned.plan"
        seconds, tune = build(args.bin, model, plan, max_tokens)
        builds.append(f"{name}: `bertrt build --device cuda --precision fp16"
                      f"{f' --max-batch-tokens {max_tokens}' if max_tokens else ''}` "
                      f"{seconds:.1f} s; tune stage: {tune}")
        print(f"[tuned_plan_bench] {builds[-1]}", flush=True)
        for label, case_args in cases:
            times = {"heuristic": [], "plan": []}
            for _ in range(args.repeats):
                for source, path in (("heuristic", model), ("plan", plan)):
                    times[source].append(bench(args.bin, path, case_args, iterations)["median_ms"])
            h, p = statistics.median(times["heuristic"]), statistics.median(times["plan"])
            rows.append((label, times["heuristic"], times["plan"], h / p))
            print(f"[tuned_plan_bench] {label}: heuristic {times['heuristic']} ms, "
                  f"plan {times['plan']} ms", flush=True)

    fmt = lambda xs: " / ".join(f"{x:.3f}" for x in xs)
    table = ["| case | heuristic (HF directory) ms | plan's GEMM choices ms | heuristic / plan |",
             "|---|---:|---:|---:|"]
    table += [f"| {label} | {fmt(h)} | {fmt(p)} | {ratio:.3f} |" for label, h, p, ratio in rows]
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    now = datetime.datetime.now(datetime.timezone.utc)
    section = [
        f"## GEMM choices stored in the plan vs cuBLASLt's heuristic ({now:%Y-%m-%d})", "",
        f"- date: {now:%Y-%m-%d %H:%M} UTC",
        f"- machine: {gpu[0] if gpu else platform.processor()}",
        f"- command: `python3 bench/tuned_plan_bench.py --bin {args.bin} --repeats {args.repeats}"
        f"{' --large' if args.large else ''}`",
        "- builds: " + "; ".join(builds),
        "- each cell: `bertrt bench --device cuda --precision fp16` medians (ms), one per repeat, "
        "the HF directory (heuristic) and the plan interleaved case by case; random weights",
        "", *table, ""]
    print("\n".join(section))
    with open(args.results, "a") as f:
        f.write("\n" + "\n".join(section))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Plan build time and time-to-serving-ready, HF directory vs plan.

Makes a random BERT-base sequence-classification model
(scripts/make_random_model.py), times `bertrt build` on it, then times
`bertrt run MODEL` on one input line from process start to the first result
(wall clock), for the HF directory and for the plan, warm (page cache) and
cold. Cold drops the page cache when permitted (`echo 3 > drop_caches`),
else evicts the model's own files with posix_fadvise(DONTNEED) and says so.
Prints a table and appends it to bench/RESULTS.md.

  python3 bench/plan_bench.py --bin build/bertrt [--device cpu|cuda] [--repeats 5]
"""
import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INPUT = b'{"text": "bertrt plans are ready to serve right after process start."}\n'


def machine():
    cpu = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def evict(paths):
    """Drops the page cache, or else the given files' pages; returns how."""
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "drop_caches"
    except OSError:
        pass
    for root in paths:
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd) if os.access(f, os.W_OK) else None
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    return "posix_fadvise(DONTNEED) on the model files (drop_caches not permitted)"


def time_cmd(cmd, cold_paths=None):
    """Seconds from starting a command fed INPUT to its first line of output
    (bertrt run prints each result as it is ready), and to its exit; cold: the
    page cache dropped first."""
    how = None
    if cold_paths is not None:
        how = evict(cold_paths)
    # stderr to a file, so that a chatty command cannot fill a pipe nobody reads.
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr)
        proc.stdin.write(INPUT)
        proc.stdin.close()
        first_line = proc.stdout.readline()
        first = time.perf_counter() - start
        proc.stdout.read()
        proc.wait()
        exited = time.perf_counter() - start
        if proc.returncode != 0 or not first_line.strip():
            stderr.seek(0)
            sys.exit(f"{' '.join(map(str, cmd))} failed: {stderr.read().decode()}")
    return first, exited, how


def time_run(binary, model, device, cold_paths=None):
    """(seconds to the first result, seconds to exit, how the cache was dropped)"""
    return time_cmd([binary, "run", model, "--device", device, "--batch-size", "1"], cold_paths)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build/bertrt"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default=None, help="plan precision (default: the device's)")
    ap.add_argument("--work", default="/tmp/bertrt-bench")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--results", default=str(ROOT / "bench/RESULTS.md"))
    args = ap.parse_args()

    work = Path(args.work)
    model = work / "bert-base-seqcls"
    if not (model / "model.safetensors").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts/make_random_model.py"), "--preset",
                        "bert-base", "--head", "seq-cls", "--num-labels", "2", "-o", str(model)],
                       check=True, stdout=subprocess.DEVNULL)
    precision = args.precision or ("fp16" if args.device == "cuda" else "fp32")
    plan = work / f"bert-base-seqcls-{args.device}-{precision}.plan"
    build_cmd = [args.bin, "build", str(model), "-o", str(plan), "--device", args.device,
                 "--precision", precision]
    builds = []
    for _ in range(max(1, args.repeats // 2)):
        start = time.perf_counter()
        proc = subprocess.run(build_cmd, capture_output=True, text=True)
        builds.append(time.perf_counter() - start)
        if proc.returncode != 0:
            sys.exit(f"bertrt build failed:\n{proc.stderr}")
    verify_line = next((l.strip() for l in proc.stdout.splitlines() if "max abs diff" in l), "")
    tune_line = next((l.split(": ", 1)[-1].strip() for l in proc.stderr.splitlines()
                      if l.startswith("[build] tune done")), "")

    rows = []
    for label, path in (("HF directory", model), ("plan", plan)):
        time_run(args.bin, path, args.device)  # warm the page cache
        warm = [time_run(args.bin, path, args.device) for _ in range(args.repeats)]
        cold = [time_run(args.bin, path, args.device, cold_paths=[path])
                for _ in range(args.repeats)]
        how = cold[-1][2]
        rows.append((label, *(statistics.median(r[i] for r in runs)
                              for runs in (warm, cold) for i in (0, 1))))

    # Where a cold start goes: the process with its shared libraries alone,
    # then reading and checking the plan (no engine), against the whole.
    parts = []
    for label, cmd in (("process start + shared libraries (`bertrt --version`)",
                        [args.bin, "--version"]),
                       ("+ plan read and checked (`bertrt tokenize PLAN`)",
                        [args.bin, "tokenize", plan]),
                       (f"+ {args.device} engine and first result (`bertrt run PLAN`)",
                        [args.bin, "run", plan, "--device", args.device, "--batch-size", "1"])):
        time_cmd(cmd)
        # To exit: `--version` and `tokenize` print before they finish.
        warm = [time_cmd(cmd)[1] for _ in range(args.repeats)]
        cold = [time_cmd(cmd, cold_paths=[plan])[1] for _ in range(args.repeats)]
        parts.append((label, statistics.median(warm), statistics.median(cold)))

    size_mib = plan.stat().st_size / 2**20
    table = [
        "| model source | serving-ready, page cache (s) | serving-ready, cold (s) "
        "| exited, page cache (s) | exited, cold (s) |",
        "|---|---:|---:|---:|---:|",
    ] + [f"| {label} | {wf:.3f} | {cf:.3f} | {we:.3f} | {ce:.3f} |"
         for label, wf, we, cf, ce in rows] + [
        "", "| cold start of the plan, step by step, to exit | page cache (s) | cold (s) |",
        "|---|---:|---:|",
    ] + [f"| {label} | {w:.3f} | {c:.3f} |" for label, w, c in parts]
    date = datetime.date.today().isoformat()
    section = "\n".join([
        f"## Plan build and time to serving-ready, BERT-base on {args.device} ({date})",
        "",
        f"- machine: {machine()}",
        f"- command: `python3 bench/plan_bench.py --bin {args.bin} --device {args.device} "
        f"--repeats {args.repeats}`",
        f"- model: random BERT-base seq-cls (110M parameters, fp32 safetensors); plan "
        f"{precision}, {size_mib:.0f} MiB",
        f"- build (`bertrt build`, load + convert + "
        f"{'tune (' + tune_line + ') + ' if tune_line else ''}write + verify on 7 built-in "
        f"samples): median {statistics.median(builds):.2f} s over {len(builds)} runs; {verify_line}",
        "- serving-ready: `bertrt run MODEL` with one input line, wall clock from process "
        "start to its first result on stdout (and, for comparison, to its exit), median of "
        f"{args.repeats}; cold = {how}",
        "",
        *table,
        "",
    ])
    print(section)
    with open(args.results, "a") as f:
        f.write("\n" + section)


if __name__ == "__main__":
    main()

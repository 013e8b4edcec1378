#!/usr/bin/env python3
"""Soak: `bertrt serve` on the CPU under steady load for a long time (issue 29).

1. Starts `bertrt serve MODEL` (HTTP only, default serving options).
2. Measures its saturation with `bertrt bench --url` (closed loop, the largest
   throughput of a few concurrencies), the anchor of this run.
3. Runs open-loop Poisson arrivals at --load (default 0.8) of that rate for
   --minutes (default 30) with `bertrt bench --url --request-rate`, sampling the
   server's RSS and thread count from /proc and its heap (malloc's bytes in use
   and kept free, from /metrics) every --sample-s (default 10 s).
4. Prints the samples and a summary and appends both to --results: growth of RSS
   and threads from the end of the warm-up (--warmup-minutes, default 5) to the
   end, and failed requests. It passes (exit 0) when each growth is under 5% and
   no request failed; exit 1 otherwise.

Not a CI test: it takes the minutes it is given.
  python3 bench/soak.py [--bertrt build/bertrt] [--model models/all-MiniLM-L6-v2]
"""
import argparse
import datetime
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench_util import free_port, rss_mb_and_threads, run_bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def heap_mb(url):
    """(in use, free) MB of the server's malloc heap and the MB its engines hold for
    activations (their largest batch so far), from its /metrics."""
    values = {}
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            name, _, value = line.rpartition(" ")
            name = name.split("{")[0]
            if name in ("bertrt_heap_in_use_bytes", "bertrt_heap_free_bytes",
                        "bertrt_engine_activation_bytes"):
                values[name] = values.get(name, 0) + float(value) / 2**20
    return tuple(values.get(k, 0) for k in ("bertrt_heap_in_use_bytes", "bertrt_heap_free_bytes",
                                            "bertrt_engine_activation_bytes"))


def bench(args, url, extra, json_path):
    cmd = [args.bertrt, "bench", "--url", url, *extra]
    return cmd + ["--json", json_path], run_bench(cmd, json_path, "soak")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bertrt", default=os.path.join(ROOT, "build/bertrt"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models/all-MiniLM-L6-v2"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup-minutes", type=float, default=5)
    ap.add_argument("--load", type=float, default=0.8, help="fraction of saturation")
    ap.add_argument("--sample-s", type=float, default=10)
    ap.add_argument("--results", default=os.path.join(ROOT, "bench/RESULTS.md"))
    ap.add_argument("--server-arg", action="append", default=[],
                    help="one more argument to `bertrt serve` (repeat for several)")
    args = ap.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([args.bertrt, "serve", args.model, "--http-port", str(port),
                               "--grpc-port", "0", *args.server_arg], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    sys.exit("soak: the server did not start:\n" + server.stderr.read())
                time.sleep(0.2)
        tmp = tempfile.mkdtemp()
        print("[soak] measuring saturation", flush=True)
        _, sat_steps = bench(args, url, ["--concurrency", "4,8,16", "--duration-s", "20",
                                         "--warmup-s", "5"], os.path.join(tmp, "sat.json"))
        saturation = max(s["requests_per_s"] for s in sat_steps)
        rate = args.load * saturation
        print(f"[soak] saturation {saturation:.1f} req/s; {args.minutes:g} min at {rate:.1f} req/s",
              flush=True)

        samples, stop = [], threading.Event()
        start = time.time()

        def sample():
            while not stop.is_set():
                rss, threads = rss_mb_and_threads(server.pid)
                samples.append((time.time() - start, rss, threads, *heap_mb(url)))
                stop.wait(args.sample_s)

        sampler = threading.Thread(target=sample)
        sampler.start()
        soak_cmd, steps = bench(args, url, ["--request-rate", f"{rate:.1f}", "--duration-s",
                                            str(args.minutes * 60), "--warmup-s", "0",
                                            "--timeout-s", "10"],
                                os.path.join(tmp, "soak.json"))
        stop.set()
        sampler.join()
        step = steps[0]
    finally:
        server.terminate()
        server.wait(60)

    warm = [s for s in samples if s[0] >= args.warmup_minutes * 60] or samples
    rss_growth = warm[-1][1] / warm[0][1] - 1
    thread_growth = warm[-1][2] / warm[0][2] - 1
    failed = step["error_count"]
    passed = rss_growth < 0.05 and thread_growth < 0.05 and failed == 0

    rows = ["| minute | RSS MB | threads | heap in use MB | heap free MB | engine activations MB |",
            "|---:|---:|---:|---:|---:|---:|"]
    every = max(1, int(60 / args.sample_s))  # one row a minute
    for t, rss, threads, used, free, engine in (samples[::every] +
                                                ([samples[-1]] if len(samples) % every != 1 else [])):
        rows.append(f"| {t / 60:.1f} | {rss:.1f} | {threads} | {used:.1f} | {free:.1f} | {engine:.1f} |")
    lat = step["latency_ms"]
    summary = (f"saturation {saturation:.1f} req/s (closed loop, best of 4, 8, 16 clients); "
               f"soak at {rate:.1f} req/s ({args.load:.0%}) for {args.minutes:g} min: "
               f"{step['requests']} requests answered at {step['requests_per_s']:.1f} req/s, "
               f"p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, {failed} failed; "
               f"after the {args.warmup_minutes:g}-minute warm-up RSS {warm[0][1]:.1f} -> "
               f"{warm[-1][1]:.1f} MB ({rss_growth:+.1%}), threads {warm[0][2]} -> {warm[-1][2]} "
               f"({thread_growth:+.1%}), heap in use {warm[0][3]:.1f} -> {warm[-1][3]:.1f} MB, "
               f"kept free {warm[0][4]:.1f} -> {warm[-1][4]:.1f} MB, engine activations "
               f"{warm[0][5]:.1f} -> {warm[-1][5]:.1f} MB: {'PASS' if passed else 'FAIL'} (growth under 5%, "
               f"no failed request)")
    print("\n".join(rows))
    print(summary)
    if args.results:
        cpu = platform.processor() or platform.machine()
        with open(args.results, "a") as f:
            f.write(f"\n## Soak: `bertrt serve` on the CPU, {args.minutes:g} minutes at "
                    f"{args.load:.0%} of saturation ({datetime.date.today()})\n\n")
            f.write(f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n")
            f.write(f"- machine: {os.cpu_count()} CPUs ({cpu}), {platform.platform()}\n")
            extra = "".join(f" --server-arg={a}" for a in args.server_arg)
            f.write(f"- command: `python3 bench/soak.py --minutes {args.minutes:g}{extra}` "
                    f"(model {os.path.basename(args.model.rstrip('/'))}; load: "
                    f"`{' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(soak_cmd))}`)\n")
            f.write(f"- anchor measured in the same run: the server's own saturation, "
                    f"{saturation:.1f} req/s\n\n")
            f.write(summary + "\n\n" + "\n".join(rows) + "\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

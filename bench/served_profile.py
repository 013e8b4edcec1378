#!/usr/bin/env python3
"""Where a served request's time goes outside the engine (issue 50): the served path at
saturation against the serving stack in-process, stage by stage.

For each text length and texts-per-request, at --concurrency closed-loop clients:

1. In-process (`bertrt bench --serve-inprocess`): the model's tokenization and dynamic
   batcher without the network, the anchor measured in the same run.
2. Served (`bertrt serve`, then `bertrt bench --url`): TEI's /embed over HTTP, KServe v2
   over HTTP and over gRPC, each after a warmup as long as its window. The server's own
   histogram bertrt_request_stage_seconds (read by the load generator at the window's
   edges) splits its requests' time into parse (the body
   read into inputs), tokenize, queue, compute (the batch's engine time) and respond (the
   outputs picked and the answer's body written); the client's mean latency less those
   is the rest: HTTP/gRPC framing, the connection's I/O threads, the hand-offs between
   threads, and the client's own work. Beside it, the CPU each request cost the server
   (from /proc, split by its threads' names: I/O, handlers, batcher and engine, other) and
   the load generator: on a shared host, what the two spend bounds the rate.

Prints one table per device and appends it to --results (bench/RESULTS.md) with the
machine, command and date. Throughput is sequences/s; ratio is served over in-process.

  python3 bench/served_profile.py --bertrt build/bertrt --model models/all-MiniLM-L6-v2 \\
      [--device cuda --precision fp16] [--seconds 8] [--concurrency 64] \\
      [--texts-per-request 1,8,32] [--words 40,380] [--server-cpus 0-9 --client-cpus 10-15]
"""
import argparse
import datetime
import os
import platform
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import urllib.request

from bench_util import free_port, run_bench, wait_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ("parse", "tokenize", "queue", "compute", "respond")


def scrape(url):
    """{stage: (sum seconds, count)} of the model's bertrt_request_stage_seconds."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {s: [0.0, 0.0] for s in STAGES}
    for line in text.splitlines():
        if not line.startswith("bertrt_request_stage_seconds_"):
            continue
        name, value = line.rsplit(" ", 1)
        stage = name.split('stage="')[1].split('"')[0]
        if name.startswith("bertrt_request_stage_seconds_sum"):
            out[stage][0] += float(value)
        elif name.startswith("bertrt_request_stage_seconds_count"):
            out[stage][1] += float(value)
    return out


def cpu_list(spec):
    """'0-7,12' -> {0..7, 12}; '' -> None (no pinning)."""
    if not spec:
        return None
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pinned(cpus):
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def children_cpu_s():
    """CPU seconds (user + system) of the children waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


THREAD_JOBS = ("io", "handler", "batcher")


def process_cpu_s(pid):
    """CPU seconds (user + system) the running process `pid` has used: {"all": ..., and
    by its threads' jobs as the server names them: "io" (http-io, grpc-io), "handler"
    (http-handler, grpc-handler), "batcher" (the batcher and engine), "other"}. Threads
    that ended meanwhile count in "all" alone."""
    def ticks(path):
        with open(path) as f:
            text = f.read()
        fields = text.rsplit(")", 1)[1].split()
        return text[text.index("(") + 1:text.rindex(")")], int(fields[11]) + int(fields[12])

    hz = os.sysconf("SC_CLK_TCK")
    out = {"all": ticks(f"/proc/{pid}/stat")[1] / hz, "other": 0.0, **{job: 0.0 for job in THREAD_JOBS}}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, t = ticks(f"/proc/{pid}/task/{tid}/stat")
        except OSError:  # ended meanwhile
            continue
        job = next((j for j in THREAD_JOBS if name == j or name.endswith("-" + j)), "other")
        out[job] += t / hz
    return out


def server_cpu_text(us):
    """'148 (40/70/30/8)': all, then io/handler/batcher/other."""
    return f"{us['all']:.0f} (" + "/".join(f"{us[k]:.0f}" for k in (*THREAD_JOBS, "other")) + ")"


def bench(args, target, extra, tmp, name, seconds=None, warmup=2, cpus=None):
    """One `bertrt bench` step; its result, with cpu_s: the CPU seconds the bench process used."""
    cmd = [args.bertrt, "bench", *target, "--concurrency", str(args.concurrency),
           "--duration-s", str(seconds or args.seconds), "--warmup-s", str(warmup), *extra]
    cpu_before = children_cpu_s()
    step = run_bench(cmd, os.path.join(tmp, name + ".json"), "served_profile",
                     preexec_fn=pinned(cpus))[0]
    step["cpu_s"] = children_cpu_s() - cpu_before
    return step


class Server:
    def __init__(self, args):
        self.port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [args.bertrt, "serve", args.model, "--device", args.device, "--http-port", str(self.port),
               "--grpc-port", str(self.grpc_port), *shlex.split(args.batching),
               *shlex.split(args.serve_args)]
        if args.precision:
            cmd += ["--precision", args.precision]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     preexec_fn=pinned(cpu_list(args.server_cpus)))
        wait_ready(self.proc, self.url, "served_profile")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bertrt", default=os.path.join(ROOT, "build", "bertrt"))
    p.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="")
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--texts-per-request", default="1,8,32")
    p.add_argument("--words", default="40,380",
                   help="words per generated text, one run each (about 50 and 512 tokens)")
    p.add_argument("--batching", default="",
                   help="batcher settings for the server and the in-process stack alike, e.g. "
                        "'--max-batch-size 256 --max-batch-tokens 32768'")
    p.add_argument("--serve-args", default="", help="more `bertrt serve` arguments, e.g. "
                                                     "'--max-queue-size 8192'")
    p.add_argument("--server-cpus", default="",
                   help="run the server on these CPUs only (taskset's list syntax, e.g. 0-7), so "
                        "that the load generator does not compete with it")
    p.add_argument("--client-cpus", default="", help="run the load generator on these CPUs only (e.g. 8-15)")
    p.add_argument("--results", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    args = p.parse_args()
    per_request = [int(x) for x in args.texts_per_request.split(",")]
    words = [int(x) for x in args.words.split(",")]
    device = ["--device", args.device] + (["--precision", args.precision] if args.precision else [])
    client_cpus = cpu_list(args.client_cpus)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args)
        try:
            for w in words:
                for n in per_request:
                    load = ["--lengths", f"{w}:{w}", "--sequences-per-request", str(n)]
                    # Warmed up as the served steps are (below).
                    inproc = bench(args, ["--serve-inprocess", args.model, *device, *shlex.split(args.batching)],
                                   load, tmp, f"in{w}x{n}", warmup=max(2, args.seconds))
                    for label, target in (
                            ("TEI /embed (HTTP)", ["--url", server.url, "--endpoint", "embed"]),
                            ("KServe HTTP", ["--url", server.url, "--endpoint", "kserve"]),
                            ("KServe gRPC", ["--url", f"grpc://127.0.0.1:{server.grpc_port}",
                                             "--metrics-url", server.url])):
                        # The load generator's own warmup (as long as the window) first
                        # brings the clients to their steady queue, and it reads the
                        # server's stages at the window's edges itself: the window's
                        # answers on both sides. (Started cold, every client's first
                        # request lands in the window, answered sooner than a steady
                        # queue answers, so the client's mean fell below the server's
                        # stages: the "rest" came out negative at 8 and 32 texts.)
                        before, server_cpu = scrape(server.url), process_cpu_s(server.proc.pid)
                        step = bench(args, target, load, tmp, f"{label.split()[0]}{len(rows)}",
                                     warmup=max(2, args.seconds), cpus=client_cpus)
                        server_cpu_after = process_cpu_s(server.proc.pid)
                        server_cpu = {k: server_cpu_after[k] - server_cpu[k] for k in server_cpu}
                        # The CPU's requests: all of the run's, warmup included, as the CPU is.
                        after = scrape(server.url)
                        requests = after["parse"][1] - before["parse"][1]
                        stage_us = {s: 1e3 * step["server"]["stages_ms"].get(s, 0.0) for s in STAGES}
                        rest = 1e3 * step["latency_ms"]["mean"] - sum(stage_us.values())
                        # CPU per request: the server's over its requests in the step; the
                        # client's whole process (its start and connections included).
                        cpu_us = ({k: 1e6 * v / max(requests, 1) for k, v in server_cpu.items()},
                                  1e6 * step["cpu_s"] / max(requests, 1))
                        rows.append((w, n, label, step, inproc, stage_us, rest, cpu_us))
                        print(f"{w} words x{n} {label}: {step['sequences_per_s']:.0f} seq/s "
                              f"(in-process {inproc['sequences_per_s']:.0f}), "
                              + ", ".join(f"{s} {stage_us[s]:.0f} us" for s in STAGES) + f", rest {rest:.0f} us"
                              f", CPU per request: server {server_cpu_text(cpu_us[0])} us, client {cpu_us[1]:.0f} us",
                              file=sys.stderr)
        finally:
            server.stop()

    now = datetime.datetime.now(datetime.timezone.utc)
    gpu = ""
    if args.device == "cuda":
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip().splitlines()[0]
    out = [f"\n## Served path by stage against the serving stack in-process (issue 50, {now:%Y-%m-%d})\n",
           f"- date: {now:%Y-%m-%d %H:%M} UTC",
           f"- machine: {os.cpu_count()} CPUs ({platform.machine()}){', ' + gpu if gpu else ''}, "
           f"{platform.platform()}",
           f"- binary: {os.path.abspath(args.bertrt)}",
           f"- command: `python3 bench/served_profile.py --model {os.path.basename(args.model)} --device "
           f"{args.device}{' --precision ' + args.precision if args.precision else ''} --seconds {args.seconds:g} "
           f"--concurrency {args.concurrency} --texts-per-request {args.texts_per_request} --words {args.words}"
           f"{' --batching ' + repr(args.batching) if args.batching else ''}"
           f"{' --serve-args ' + repr(args.serve_args) if args.serve_args else ''}"
           f"{' --server-cpus ' + args.server_cpus if args.server_cpus else ''}"
           f"{' --client-cpus ' + args.client_cpus if args.client_cpus else ''}`",
           "- anchor measured in the same run: `bertrt bench --serve-inprocess` (tokenization and the "
           "batcher, no network) at the same load",
           "- stages: the server's bertrt_request_stage_seconds per request (mean); rest: the client's "
           "mean latency less them (framing, I/O threads, hand-offs, the client)",
           "- CPU per request: the server process's user + system time over the step's requests, all "
           "(then by thread: I/O / handlers / batcher and engine / other), and the load generator's (its "
           "whole process: start and connections included); the in-process stack runs unpinned\n",
           "| words | texts/req | front end | served seq/s | in-process seq/s | ratio | p99 ms | in-process p99 ms "
           "| parse us | tokenize us | queue us | compute us | respond us | rest us | server CPU us (io/handler/batcher/other) "
           "| client CPU us |",
           "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for w, n, label, step, inproc, st, rest, cpu_us in rows:
        out.append(f"| {w} | {n} | {label} | {step['sequences_per_s']:.0f} | {inproc['sequences_per_s']:.0f} | "
                   f"{step['sequences_per_s'] / max(inproc['sequences_per_s'], 1e-9):.2f} | "
                   f"{step['latency_ms']['p99']:.1f} | {inproc['latency_ms']['p99']:.1f} | "
                   + " | ".join(f"{st[s]:.0f}" for s in STAGES) + f" | {rest:.0f} | {server_cpu_text(cpu_us[0])} | {cpu_us[1]:.0f} |")
    text = "\n".join(out) + "\n"
    print(text)
    with open(args.results, "a") as f:
        f.write(text)


if __name__ == "__main__":
    main()

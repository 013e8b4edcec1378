#!/usr/bin/env python3
"""Scale-out on one machine: HAProxy (Debian's) in front of N `bertrt serve` replicas,
with the health check the Helm chart's readiness probe uses (GET /v2/health/ready), as a
Kubernetes Service would route (issue 49).

1. Throughput: for N = 1 .. --replicas, closed-loop `bertrt bench --url` through the
   balancer (TEI /embed, one text per request, the default model, CPU), each replica with
   cores/N engine threads; the best requests/s over a few concurrencies and its p99, and
   one replica reached directly (the balancer's own cost) as the anchor of the run.
2. Rolling restart under load: open-loop arrivals at --load of the N-replica
   saturation while each replica in turn gets SIGTERM (it stops listening and drains,
   `--drain-timeout`), exits, and is started again; the next waits until the balancer
   has the new one up. Failed requests are counted: the promise is zero.
3. A replica killed with SIGKILL under the same load, started again 5 s later: the
   requests it held fail (what was in flight on it, at most the load's outstanding
   requests), the rest go to the others.

The balancer retries a request whose connection failed or got no answer
(`retry-on conn-failure empty-response`) on another replica, as Envoy's and most
ingress controllers' defaults do for refused connections.

  python3 bench/scale_out.py [--bertrt build/bertrt] [--model models/all-MiniLM-L6-v2]
Prints the tables and appends them to --results (bench/RESULTS.md). Needs haproxy
(apt-get install haproxy). Exit 1 when the rolling restart failed a request.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from bench_util import free_port, ready, run_bench, wait_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Replica:
    def __init__(self, args, port, threads):
        self.args, self.port, self.threads = args, port, threads
        self.url = f"http://127.0.0.1:{port}"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([self.args.bertrt, "serve", self.args.model, "--http-port", str(self.port),
                                      "--grpc-port", "0", "--threads", str(self.threads), "--drain-timeout", "30"],
                                     stderr=subprocess.DEVNULL)
        wait_ready(self.proc, self.url, f"scale_out: replica on {self.port}", seconds=120)

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        return self.proc.wait(60)


class Balancer:
    def __init__(self, replicas, tmp):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stats = os.path.join(tmp, "haproxy.sock")
        servers = "\n".join(f"  server r{i} 127.0.0.1:{r.port} check" for i, r in enumerate(replicas))
        config = f"""global
  maxconn 4096
  stats socket {self.stats} level admin
defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response
frontend fe
  bind 127.0.0.1:{self.port}
  default_backend be
backend be
  balance leastconn
  option httpchk GET /v2/health/ready
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1
{servers}
"""
        path = os.path.join(tmp, f"haproxy-{self.port}.cfg")
        with open(path, "w") as f:
            f.write(config)
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", path], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while not ready(self.url):
            if time.time() > deadline:
                sys.exit("scale_out: haproxy did not start")
            time.sleep(0.1)

    def up(self, index):
        """Whether the balancer has replica `index` up (its health check passed)."""
        with socket.socket(socket.AF_UNIX) as c:
            c.connect(self.stats)
            c.sendall(b"show stat\n")
            out = b""
            while chunk := c.recv(65536):
                out += chunk
        out = out.decode()
        for line in out.splitlines():
            fields = line.split(",")
            if len(fields) > 17 and fields[0] == "be" and fields[1] == f"r{index}":
                return fields[17].startswith("UP")
        return False

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def bench(args, url, extra, tmp, name):
    return run_bench([args.bertrt, "bench", "--url", url, "--endpoint", "embed", *extra],
                     os.path.join(tmp, name + ".json"), "scale_out")


def saturation(args, url, tmp, name):
    steps = bench(args, url, ["--concurrency", "4,8,16", "--duration-s", str(args.seconds),
                              "--warmup-s", "3"], tmp, name)
    best = max(steps, key=lambda s: s["requests_per_s"])
    return best


def under_load(args, url, rate, seconds, tmp, name, events):
    """Open-loop load for `seconds` while `events` (a function) runs beside it."""
    result = {}
    t = threading.Thread(target=lambda: result.update(step=bench(
        args, url, ["--request-rate", f"{rate:.1f}", "--duration-s", str(seconds), "--warmup-s", "0",
                    "--timeout-s", "30"], tmp, name)[0]))
    t.start()
    time.sleep(2)
    notes = events()
    t.join()
    return result["step"], notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bertrt", default=os.path.join(ROOT, "build/bertrt"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models/all-MiniLM-L6-v2"))
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=15, help="measured seconds per throughput step")
    ap.add_argument("--load", type=float, default=0.5, help="fraction of saturation during restarts")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench/RESULTS.md"))
    args = ap.parse_args()
    if not shutil.which("haproxy"):
        sys.exit("scale_out: haproxy not found: apt-get install haproxy")
    cores = os.cpu_count()
    tmp = tempfile.mkdtemp()
    rows = []

    # 1. Throughput at N = 1 .. R, and one replica without the balancer.
    for n in range(1, args.replicas + 1):
        replicas = [Replica(args, free_port(), max(1, cores // n)) for _ in range(n)]
        for r in replicas:
            r.start()
        if n == 1:
            direct = saturation(args, replicas[0].url, tmp, "direct")
            rows.append(("1, no balancer (anchor)", direct))
        lb = Balancer(replicas, tmp)
        rows.append((f"{n} behind haproxy", saturation(args, lb.url, tmp, f"n{n}")))
        if n < args.replicas:
            lb.stop()
            for r in replicas:
                r.stop()
    sat = rows[-1][1]["requests_per_s"]
    rate = args.load * sat

    # 2. Rolling restart, one replica at a time.
    def rolling():
        notes = []
        for i, r in enumerate(replicas):
            t0 = time.time()
            code = r.stop()
            drained = time.time() - t0
            r.start()
            while not lb.up(i):
                time.sleep(0.1)
            notes.append(f"r{i}: exit {code} after {drained:.2f} s of drain, back up in {time.time() - t0:.1f} s")
        return notes
    roll_step, roll_notes = under_load(args, lb.url, rate, 8 * len(replicas) + 10, tmp, "rolling", rolling)

    # 3. SIGKILL one replica, start it again 5 s later.
    def kill():
        replicas[0].stop(signal.SIGKILL)
        time.sleep(5)
        replicas[0].start()
        while not lb.up(0):
            time.sleep(0.1)
        return ["r0 killed (SIGKILL), restarted 5 s later"]
    kill_step, kill_notes = under_load(args, lb.url, rate, 20, tmp, "kill", kill)
    lb.stop()
    for r in replicas:
        r.stop()

    now = datetime.datetime.now(datetime.timezone.utc)
    out = [f"\n## Scale-out behind HAProxy on the CPU machine (issue 49, {now:%Y-%m-%d})\n",
           f"- date: {now:%Y-%m-%d %H:%M} UTC",
           f"- machine: {cores} CPUs ({platform.machine()}), {platform.platform()}",
           f"- command: `python3 bench/scale_out.py --replicas {args.replicas} --seconds {args.seconds:g} "
           f"--load {args.load:g}` (model {os.path.basename(args.model)}, TEI /embed, one text per request; "
           f"{subprocess.run(['haproxy', '-v'], capture_output=True, text=True).stdout.splitlines()[0]}, "
           "leastconn, health check GET /v2/health/ready every 500 ms, retry-on conn-failure empty-response)",
           "- anchor measured in the same run: one replica reached directly, without the balancer\n",
           "| replicas | req/s (best of c=4, 8, 16) | p50 ms | p99 ms | failed |", "|---|---:|---:|---:|---:|"]
    for label, s in rows:
        out.append(f"| {label} | {s['requests_per_s']:.1f} | {s['latency_ms']['p50']:.1f} | "
                   f"{s['latency_ms']['p99']:.1f} | {s['error_count']} |")
    out += ["", f"Under load at {rate:.1f} req/s ({args.load:g} of the {args.replicas}-replica saturation):", "",
            "| event | requests | failed | p50 ms | p99 ms | max ms | what happened |", "|---|---:|---:|---:|---:|---:|---|"]
    for label, s, notes in (("rolling restart", roll_step, roll_notes), ("SIGKILL", kill_step, kill_notes)):
        out.append(f"| {label} | {s['requests']} | {s['error_count']} | {s['latency_ms']['p50']:.1f} | "
                   f"{s['latency_ms']['p99']:.1f} | {s['latency_ms']['max']:.1f} | {'; '.join(notes)}"
                   f"{'; errors: ' + json.dumps(s['errors']) if s['error_count'] else ''} |")
    text = "\n".join(out) + "\n"
    print(text)
    with open(args.results, "a") as f:
        f.write(text)
    sys.exit(0 if roll_step["error_count"] == 0 else 1)


if __name__ == "__main__":
    main()

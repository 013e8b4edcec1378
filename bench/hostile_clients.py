#!/usr/bin/env python3
"""Issue 29's acceptance runs (a program, not a CI test): `bertrt serve` on the CPU
with the default model, and a normal client (one keep-alive connection, one short
text per /embed request) timed alone, then beside each crowd of hostile or careless
clients:
  - idle: N connections open, each after a request of its own, kept alive;
  - slowloris: M connections sending a header byte every 0.5 s (never finishing it).
Prints the normal client's p50/p99 per run and whether any request was lost or any
slow connection outlived --http-header-timeout; appends the table to bench/RESULTS.md.
  python3 bench/hostile_clients.py [--idle 500] [--slow 200] [--requests 500]
"""
import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post_bytes(path, body):
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def read_response(c):
    out = b""
    while b"\r\n\r\n" not in out:
        d = c.recv(65536)
        if not d:
            return out
        out += d
    head, _, body = out.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        d = c.recv(65536)
        if not d:
            break
        body += d
    return head + b"\r\n\r\n" + body


def normal_client(url, n):
    """Latencies (ms) of n requests and how many failed."""
    session = requests.Session()
    times, failed = [], 0
    for i in range(n):
        t0 = time.perf_counter()
        try:
            ok = session.post(url + "/embed", json={"inputs": f"hello world {i}"},
                              timeout=30).status_code == 200
        except requests.RequestException:
            ok = False
        times.append((time.perf_counter() - t0) * 1000)
        failed += not ok
    times.sort()
    return times, failed


def quantile(sorted_ms, q):
    return sorted_ms[int(q * (len(sorted_ms) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bertrt", default=str(ROOT / "build/bertrt"))
    ap.add_argument("--model", default=str(ROOT / "models/all-MiniLM-L6-v2"))
    ap.add_argument("--idle", type=int, default=500, help="kept-alive connections")
    ap.add_argument("--slow", type=int, default=200, help="slowloris connections")
    ap.add_argument("--requests", type=int, default=500, help="normal client's requests per run")
    ap.add_argument("--header-timeout", type=float, default=10)
    ap.add_argument("--results", default=str(ROOT / "bench/RESULTS.md"))
    args = ap.parse_args()

    port = free_port()
    server_args = [args.bertrt, "serve", args.model, "--http-port", str(port), "--grpc-port", "0",
                   "--http-thread-count", "8", "--http-max-threads", "128",
                   "--http-header-timeout", str(args.header_timeout)]
    proc = subprocess.Popen(server_args, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"bertrt serve exited ({proc.returncode}): {' '.join(server_args)}")
        try:
            if requests.get(url + "/v2/health/ready", timeout=1).status_code == 200:
                break
        except requests.RequestException:
            pass
        time.sleep(0.1)
    rows = []
    try:
        normal_client(url, 50)  # warm-up
        alone, failed = normal_client(url, args.requests)
        rows.append(("normal client alone (anchor)", alone, failed, ""))

        # Idle: every connection made one request and is kept alive.
        idle, lost = [], 0
        for i in range(args.idle):
            c = socket.create_connection(("127.0.0.1", port))
            c.settimeout(30)
            c.sendall(post_bytes("/embed", {"inputs": f"connection {i}"}))
            lost += not read_response(c).startswith(b"HTTP/1.1 200")
            idle.append(c)
        times, failed = normal_client(url, args.requests)
        for i, c in enumerate(idle):  # still served afterwards
            c.sendall(post_bytes("/embed", {"inputs": f"again {i}"}))
            lost += not read_response(c).startswith(b"HTTP/1.1 200")
        threads = len(os.listdir(f"/proc/{proc.pid}/task"))
        rows.append((f"{args.idle} kept-alive connections", times, failed,
                     f"{lost} of {2 * args.idle} of their requests lost; server threads {threads}"))
        for c in idle:
            c.close()

        # Slowloris: a header byte every 0.5 s on every connection.
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.slow)]
        opened = time.monotonic()
        stop = threading.Event()

        def drip():
            header = b"POST /embed HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
            for i in range(len(header)):
                for c in slow:
                    try:
                        c.send(header[i:i + 1])
                    except OSError:
                        pass
                if stop.wait(0.5):
                    return

        dripper = threading.Thread(target=drip)
        dripper.start()
        times, failed = normal_client(url, args.requests)
        time.sleep(max(0.0, args.header_timeout + 1 - (time.monotonic() - opened)))
        still_open = 0
        for c in slow:
            c.settimeout(5)
            try:
                still_open += c.recv(4096) != b""
            except OSError:
                pass
        stop.set()
        dripper.join()
        for c in slow:
            c.close()
        rows.append((f"{args.slow} slowloris connections", times, failed,
                     f"{still_open} still open {args.header_timeout + 1:g} s after opening"))
    finally:
        proc.terminate()
        proc.wait(60)

    lines = ["| run | normal client p50 ms | p99 ms | its failed requests | the crowd |",
             "|---|---:|---:|---:|---|"]
    for name, times, failed, note in rows:
        lines.append(f"| {name} | {statistics.median(times):.2f} | {quantile(times, 0.99):.2f} | "
                     f"{failed} | {note} |")
    table = "\n".join(lines)
    print(table)
    now = datetime.datetime.now(datetime.timezone.utc)
    section = f"""
## Hostile and careless clients: kept-alive crowds and slowloris (issue 29, {now:%Y-%m-%d})

- date: {now:%Y-%m-%d %H:%M} UTC
- machine: {os.cpu_count()} CPUs ({platform.machine()}), {platform.platform()}
- command: `python3 bench/hostile_clients.py --idle {args.idle} --slow {args.slow} --requests {args.requests} --header-timeout {args.header_timeout:g}` (server: `bertrt serve <all-MiniLM-L6-v2> --http-thread-count 8 --http-max-threads 128 --http-header-timeout {args.header_timeout:g}`, CPU; clients on the same machine)
- anchor measured in the same run: the normal client alone (first row)

{table}
"""
    with open(args.results, "a") as f:
        f.write(section)
    worst = max(quantile(t, 0.99) for _, t, _, _ in rows[1:])
    lost_any = any(failed for _, _, failed, _ in rows) or "0 of" not in rows[1][3] or \
        not rows[2][3].startswith("0 ")
    print(f"worst p99 beside a crowd {worst:.2f} ms; "
          f"{'something was lost or outlived its deadline' if lost_any else 'nothing lost'}")
    return 1 if lost_any or worst >= 50 else 0


if __name__ == "__main__":
    sys.exit(main())

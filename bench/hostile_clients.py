#!/usr/bin/env python3
"""Hostile and careless clients against `bertrt serve` (issues 29 and 44): a program,
not a CI test. The servers run on the CPU: the default model with gRPC on and an API
key (the normal client sends it, the attackers do not unless a case says so), an
XLM-R test model, a classifier and a polled model repository. A normal client (one keep-alive
connection, one short text per request) is timed alone, then beside each attack in
turn. Each row gives the normal client's p50/p99 and failed requests while the
attack ran, what the attack got (the server's answers), the server's resident memory
before, at its peak during the attack and 1 s after, and whether the row passed:
every attack answered as intended, no normal request lost, the server up.
Appends the table to bench/RESULTS.md; exit 1 if any row failed.
  python3 bench/hostile_clients.py [--requests 300] [--only NAME,...]
"""
import argparse
import collections
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests/data/models"
KEY = "hostile-bench-key"
# The attackers, shared with the tests (test_hostile.py, test_hardening.py,
# test_grpc_hostile.py).
sys.path.insert(0, str(ROOT / "tests/server"))
import http2_attacks  # noqa: E402
from bench_util import free_port  # noqa: E402
from http_attacks import chunked_flood, kserve_ids, post_bytes, read_response, status_of  # noqa: E402


class Server:
    """`bertrt serve` on free ports; stderr to a file (read by the cases that check logs)."""

    def __init__(self, binary, args, key=None):
        self.port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.grpc_address = f"127.0.0.1:{self.grpc_port}"
        self.key = key
        self.auth = {"Authorization": f"Bearer {key}"} if key else {}
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log")
        self.args = [binary, "serve", *args, "--http-port", str(self.port), "--grpc-port",
                     str(self.grpc_port)] + (["--api-key", key] if key else [])
        self.proc = subprocess.Popen(self.args, stderr=self.log)
        for _ in range(1200):
            if self.proc.poll() is not None:
                sys.exit(f"bertrt serve exited ({self.proc.returncode}): {' '.join(self.args)}")
            try:
                if requests.get(self.url + "/v2/health/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        sys.exit(f"bertrt serve did not become ready: {' '.join(self.args)}")

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) / 1024

    def up(self):
        try:
            return self.proc.poll() is None and requests.get(
                self.url + "/v2/health/live", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def normal_client(server, n, path="/embed", body=lambda i: {"inputs": f"hello world {i}"}):
    """Latencies (ms, sorted) of n requests on one keep-alive connection, and how many failed."""
    session = requests.Session()
    session.headers.update(server.auth)
    times, failed = [], 0
    for i in range(n):
        t0 = time.perf_counter()
        try:
            ok = session.post(server.url + path, json=body(i), timeout=60).status_code == 200
        except requests.RequestException:
            ok = False
        times.append((time.perf_counter() - t0) * 1000)
        failed += not ok
    return sorted(times), failed


def quantile(sorted_ms, q):
    return sorted_ms[int(q * (len(sorted_ms) - 1))]


def repeat_while(measure, attack_once):
    """Runs attack_once over and over while measure() runs; the outcomes counted."""
    outcomes, stop = collections.Counter(), threading.Event()

    def loop():
        while not stop.is_set():
            outcomes[attack_once()] += 1

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
        t.start()
    measure()
    stop.set()
    for t in threads:
        t.join()
    return outcomes


def summary(outcomes):
    return ", ".join(f"{n} x {k}" for k, n in outcomes.most_common())


# --- the cases: each returns (what the attack got, whether that is what it must get) -----

AUTH_LINE = f"Authorization: Bearer {KEY}".encode()


def answered(c):
    """The status of the response on c ("closed" when there is none)."""
    try:
        return status_of(read_response(c))
    except (ConnectionError, OSError):
        return "closed"


def case_idle(ctx, measure):
    """500 connections, each kept alive after a request of its own."""
    s, conns, lost = ctx.main, [], 0
    for i in range(ctx.args.idle):
        c = socket.create_connection(("127.0.0.1", s.port))
        c.settimeout(30)
        c.sendall(post_bytes("/embed", {"inputs": f"connection {i}"}, AUTH_LINE))
        lost += answered(c) != 200
        conns.append(c)
    measure()
    for i, c in enumerate(conns):  # still served afterwards
        c.sendall(post_bytes("/embed", {"inputs": f"again {i}"}, AUTH_LINE))
        lost += answered(c) != 200
        c.close()
    threads = len(os.listdir(f"/proc/{s.proc.pid}/task"))
    return f"{lost} of {2 * len(conns)} requests lost; server threads {threads}", lost == 0


def case_slowloris(ctx, measure):
    """200 connections sending a header byte every 0.5 s, never finishing it."""
    s = ctx.main
    slow = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(ctx.args.slow)]
    opened, stop = time.monotonic(), threading.Event()

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
    measure()
    time.sleep(max(0.0, ctx.args.header_timeout + 1 - (time.monotonic() - opened)))
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
    return (f"{still_open} of {len(slow)} still open {ctx.args.header_timeout + 1:g} s after "
            f"opening"), still_open == 0


def case_d1_long_path(ctx, measure):
    """D1: a 40,000-byte model name in four routes, no key."""
    s, name = ctx.main, "a" * 40000
    routes = [("GET", f"/v2/models/{name}/config"), ("POST", f"/models/{name}/embed"),
              ("POST", f"/v2/repository/models/{name}/load"), ("GET", f"/models/{name}/health")]
    turn = iter(range(10 ** 9))

    def once():
        method, path = routes[next(turn) % len(routes)]
        try:
            return requests.request(method, s.url + path, timeout=10).status_code
        except requests.RequestException:
            return "no answer"

    got = repeat_while(measure, once)
    return summary(got), set(got) == {414}


def case_d2_chunked(ctx, measure):
    """D2: 100 MB of chunked trailer, then 100 MB of one chunk's extension; without the
    key (refused before the body) and with it (cut off at the buffer's limit)."""
    got = collections.Counter()

    def attack():
        for key in (None, KEY):
            for where in ("trailer", "extension"):
                got[f"{where}{' with key' if key else ''} "
                    f"{chunked_flood(ctx.main.port, where, 100, key=key)}"] += 1

    t = threading.Thread(target=attack)
    t.start()
    measure()
    t.join()
    return summary(got), set(got) == {"trailer 401", "extension 401", "trailer with key 400",
                                      "extension with key 400"}


def case_d3_shapes(ctx, measure):
    """D3: input_ids declared [10000000, 0] and [2^40, 0] with no data (100-byte bodies)."""
    s, turn = ctx.main, iter(range(10 ** 9))

    def once():
        shape = [[10000000, 0], [2 ** 40, 0]][next(turn) % 2]
        return requests.post(s.url + "/v2/models/all-MiniLM-L6-v2/infer",
                             json=kserve_ids(shape, []), headers=s.auth, timeout=60).status_code

    got = repeat_while(measure, once)
    return summary(got), set(got) == {400}


def case_d4_declared_length(ctx, measure):
    """D4: input_ids [1, 200000] with truncate asking last_hidden_state, and a mask
    keeping a token at position 199,999."""
    s, n, turn = ctx.main, 200000, iter(range(10 ** 9))
    url = s.url + "/v2/models/all-MiniLM-L6-v2/infer"

    def once():
        if next(turn) % 2 == 0:
            r = requests.post(url, json=kserve_ids([1, n], [101] + [1037] * (n - 2) + [102],
                                                  outputs=["last_hidden_state"], truncate=True),
                              headers=s.auth, timeout=60)
            return f"{r.status_code} {r.json()['outputs'][0]['shape']}" if r.ok else r.status_code
        mask = [1] + [0] * (n - 2) + [1]
        r = requests.post(url, json=kserve_ids([1, n], [101] + [0] * (n - 2) + [102], mask=mask,
                                               outputs=["last_hidden_state"]),
                          headers=s.auth, timeout=60)
        return r.status_code

    got = repeat_while(measure, once)
    return summary(got), set(got) == {"200 [1, 256, 384]", 400}


def case_d5_long_texts(ctx, measure):
    """D5: six concurrent 6 MB /embed bodies with truncate (each is read only as far as
    its first 256 tokens), sent again and again while the normal client runs."""
    s = ctx.main
    body = json.dumps({"inputs": "word " * (6 * 2 ** 20 // 5), "truncate": True})
    got, stop = collections.Counter(), threading.Event()

    def sender():
        while not stop.is_set():
            got[requests.post(s.url + "/embed", data=body, timeout=120,
                              headers={**s.auth, "Content-Type": "application/json"}
                              ).status_code] += 1

    senders = [threading.Thread(target=sender) for _ in range(6)]
    for t in senders:
        t.start()
    measure()
    stop.set()
    for t in senders:
        t.join()
    return summary(got), set(got) == {200}


def case_d5_expanding_text(ctx, measure):
    """D5: a 6 MB text of U+FDFA (NFKC makes each 18 characters) to an XLM-R model's
    /tokenize and /embed, without truncate (refused as soon as it is too long) and with
    it (its first tokens embedded)."""
    s, turn = ctx.xlmr, iter(range(10 ** 9))
    text = "\ufdfa" * (2 * 2 ** 20)

    def once():
        path, body = [("/tokenize", {"inputs": text}), ("/embed", {"inputs": text}),
                      ("/embed", {"inputs": text, "truncate": True})][next(turn) % 3]
        r = requests.post(s.url + path, json=body, timeout=120)
        return f"{path}{' truncate' if 'truncate' in body else ''} {r.status_code}"

    got = repeat_while(measure, once)
    return summary(got), set(got) == {"/tokenize 422", "/embed 422", "/embed truncate 200"}


def grpc_probes_while(ctx, measure):
    """measure(), with a gRPC ModelInfer probe (with the key) every 0.1 s meanwhile:
    (answered, failed)."""
    done, counts = threading.Event(), collections.Counter()

    def probes():
        while not done.is_set():
            counts[http2_attacks.probe(ctx.main.grpc_address, "all-MiniLM-L6-v2", KEY,
                                       timeout=2.0) is None] += 1
            time.sleep(0.1)

    t = threading.Thread(target=probes)
    t.start()
    measure()
    done.set()
    t.join()
    return counts[True], counts[False]


def case_d6_idle_streams(ctx, measure):
    """D6: 300 ModelStreamInfer calls over 3 connections that never send a message."""
    streams = http2_attacks.IdleStreams(ctx.main.grpc_address, 300, connections=3, api_key=KEY)
    answered, failed = grpc_probes_while(ctx, measure)
    ended = streams.ended()
    streams.close()
    return (f"gRPC probes during: {answered} answered, {failed} failed; idle streams ended by "
            f"the server so far: {ended or 'none'}"), failed == 0 and answered > 0


def rapid_reset(ctx, measure, **attack):
    """D7: HEADERS + RST_STREAM pairs for --reset-seconds, then the time to the next
    answered gRPC call."""
    a = http2_attacks.RapidReset(ctx.main.grpc_address, ctx.args.reset_seconds, **attack).start()
    answered, failed = grpc_probes_while(ctx, measure)
    a.join()
    stopped, recovered = time.monotonic(), None
    while recovered is None and time.monotonic() - stopped < 5:
        if http2_attacks.probe(ctx.main.grpc_address, "all-MiniLM-L6-v2", KEY, timeout=1) is None:
            recovered = time.monotonic() - stopped
    goaways = collections.Counter(a.goaways)
    return (f"{a.pairs:,} pairs on {a.connections:,} connections"
            + (f", GOAWAY {dict(goaways)}" if goaways else "")
            + f"; gRPC probes during: {answered} answered, {failed} failed; answered "
            + (f"{recovered:.3f} s after" if recovered is not None else "NOT within 5 s after")), \
        recovered is not None and recovered < 1 and answered > 0


def case_d7_reset(ctx, measure):
    """D7: rapid reset, never reading the socket, no key."""
    return rapid_reset(ctx, measure)


def case_d7_reset_read(ctx, measure):
    """D7: rapid reset, reading what the server sends (GOAWAY seen), no key."""
    return rapid_reset(ctx, measure, read=True)


def case_d7_reset_key(ctx, measure):
    """D7: rapid reset with the API key."""
    return rapid_reset(ctx, measure, api_key=KEY)


def case_d7_made_you_reset(ctx, measure):
    """D7's sibling: whole requests each followed by a WINDOW_UPDATE that makes the
    server reset the stream itself (MadeYouReset), with the key."""
    return rapid_reset(ctx, measure, api_key=KEY, made_you_reset="all-MiniLM-L6-v2")


def case_d8_config_types(ctx, measure):
    """D8: a model whose tokenizer_config.json says {"do_lower_case": "yes"} dropped into
    the polled repository, then loaded by name."""
    repo = ctx.repo
    target = repo.dir / "typo" / "1"
    shutil.copytree(MODELS / "seq_cls", target)
    (target / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": "yes"}))
    measure()
    reason = ""
    for _ in range(100):
        index = {e["name"]: e for e in requests.post(repo.server.url + "/v2/repository/index",
                                                     timeout=10).json()}
        reason = index.get("typo", {}).get("reason", "")
        if "do_lower_case" in reason:
            break
        time.sleep(0.1)
    shutil.rmtree(repo.dir / "typo")
    up = repo.server.up()
    return f"index: {reason!r}; server {'up' if up else 'DOWN'}", "do_lower_case" in reason and up


def case_d9_poll_walk(ctx, measure):
    """D9: 60,000 small files in another model's version folder, 1 s poll (the normal
    client's model lookups against the repository server)."""
    junk = ctx.repo.dir / "big" / "1" / "junk"
    junk.mkdir()
    for i in range(60000):
        (junk / str(i)).write_bytes(b"x")
    time.sleep(2)
    measure()
    shutil.rmtree(junk)
    return "60,000 files walked at each 1 s poll", True


def case_d10_sighup(ctx, measure):
    """D10: SIGHUP while the normal client runs."""
    s = ctx.main
    t = threading.Thread(target=measure)
    t.start()
    time.sleep(0.2)
    s.proc.send_signal(signal.SIGHUP)
    t.join()
    s.log.seek(0)
    logged = "SIGHUP ignored" in s.log.read()
    up = s.up()
    return f"server {'up' if up else 'DOWN'}; logged: {logged}", up and logged


def case_d11_open_routes(ctx, measure):
    """D11: every open route, and protected ones without the key, looked at for what
    they tell (model names, paths, load errors)."""
    s, repo = ctx.main, ctx.repo
    leaks = []
    measure()
    for server, secrets in ((s, ["all-MiniLM-L6-v2", str(ROOT)]),
                            (repo.server, ["good", "big", str(repo.dir)])):
        for method, path in [("GET", "/v2/health/live"), ("GET", "/v2/health/ready"),
                             ("GET", "/health"), ("GET", "/ping"), ("GET", "/"),
                             ("GET", "/models/x/health"), ("GET", "/metrics"),
                             ("GET", "/v2/models/nope"), ("POST", "/v2/repository/models/x/load")]:
            r = requests.request(method, server.url + path, timeout=10)
            if server is s or path.startswith("/v2/health") or path in ("/health", "/ping", "/"):
                leaks += [f"{path}: {x}" for x in secrets if x in r.text]
    return (f"{len(leaks)} leaks" + (f": {leaks[:3]}" if leaks else "")), not leaks


def case_d12_empty_pair(ctx, measure):
    """D12: an empty second text of a pair (/predict, KServe text_pair)."""
    s, turn = ctx.cls, iter(range(10 ** 9))

    def once():
        if next(turn) % 2:
            return requests.post(s.url + "/predict", json={"inputs": [["a", ""]]},
                                 timeout=10).status_code
        return requests.post(s.url + "/v2/models/seq_cls/infer", json={"inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a"]},
            {"name": "text_pair", "datatype": "BYTES", "shape": [1], "data": [""]}]},
            timeout=10).status_code

    got = repeat_while(measure, once)
    return summary(got), set(got) <= {400, 422}


CASES = [
    ("idle", "500 kept-alive connections (issue 29)", case_idle, "main"),
    ("slowloris", "200 slowloris connections (issue 29)", case_slowloris, "main"),
    ("d1", "D1 40,000-byte model names, no key", case_d1_long_path, "main"),
    ("d2", "D2 100 MB chunked trailers and extensions", case_d2_chunked, "main"),
    ("d3", "D3 shapes [1e7, 0] and [2^40, 0]", case_d3_shapes, "main"),
    ("d4", "D4 ids [1, 200000]: truncated, and a far mask", case_d4_declared_length, "main"),
    ("d5", "D5 six 6 MB /embed bodies with truncate, again and again", case_d5_long_texts,
     "main"),
    ("d5fdfa", "D5 6 MB of U+FDFA on XLM-R", case_d5_expanding_text, "xlmr"),
    ("d6", "D6 300 idle gRPC streams", case_d6_idle_streams, "main"),
    ("d7", "D7 rapid reset, not reading", case_d7_reset, "main"),
    ("d7read", "D7 rapid reset, reading", case_d7_reset_read, "main"),
    ("d7key", "D7 rapid reset with the API key", case_d7_reset_key, "main"),
    ("d7made", "D7 MadeYouReset with the API key", case_d7_made_you_reset, "main"),
    ("d8", "D8 wrong-typed tokenizer_config.json, polled", case_d8_config_types, "repo"),
    ("d9", "D9 60,000 files walked at each poll", case_d9_poll_walk, "repo"),
    ("d10", "D10 SIGHUP", case_d10_sighup, "main"),
    ("d11", "D11 open routes with --api-key", case_d11_open_routes, "main"),
    ("d12", "D12 empty second texts of pairs", case_d12_empty_pair, "main"),
]


class Repository:
    """A polled repository: good (the default model, linked) and big (a test model)."""

    def __init__(self, binary, model):
        self.dir = Path(tempfile.mkdtemp(prefix="bertrt-hostile-repo-"))
        (self.dir / "good" / "1").mkdir(parents=True)
        for f in Path(model).iterdir():
            (self.dir / "good" / "1" / f.name).symlink_to(f.resolve())
        shutil.copytree(MODELS / "seq_cls", self.dir / "big" / "1")
        self.server = Server(binary, ["--model-repository", str(self.dir), "--model-control-mode",
                                      "poll", "--repository-poll-secs", "1"])


class Context:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bertrt", default=str(ROOT / "build/bertrt"))
    ap.add_argument("--model", default=str(ROOT / "models/all-MiniLM-L6-v2"))
    ap.add_argument("--idle", type=int, default=500, help="kept-alive connections")
    ap.add_argument("--slow", type=int, default=200, help="slowloris connections")
    ap.add_argument("--requests", type=int, default=300, help="normal client's requests per row")
    ap.add_argument("--header-timeout", type=float, default=10)
    ap.add_argument("--reset-seconds", type=float, default=10, help="each rapid-reset attack")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--results", default=str(ROOT / "bench/RESULTS.md"))
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))

    ctx = Context()
    ctx.args = args
    ctx.main = Server(args.bertrt, [args.model, "--http-thread-count", "8", "--http-max-threads",
                                    "128", "--http-header-timeout", str(args.header_timeout)],
                      key=KEY)
    ctx.cls = Server(args.bertrt, [str(MODELS / "seq_cls")])
    ctx.xlmr = Server(args.bertrt, [str(MODELS / "xlmr_sentence_mean"), "--max-payload-bytes",
                                    str(16 * 2 ** 20)])
    ctx.repo = Repository(args.bertrt, args.model)
    servers = [ctx.main, ctx.cls, ctx.xlmr, ctx.repo.server]
    rows = []
    try:
        anchors = {}
        for where, server, path in (("main", ctx.main, "/embed"),
                                    ("repo", ctx.repo.server, "/models/good/embed")):
            normal_client(server, 50, path)  # warm-up
            anchors[where] = normal_client(server, args.requests, path)
            rows.append((f"normal client alone, {where} server (anchor)", anchors[where],
                         "", None, True))
        for name, title, case, where in CASES:
            if only and name not in only:
                continue
            # The normal client on the main server, or the repository's; memory is
            # sampled on the server attacked.
            server, path = (ctx.repo.server, "/models/good/embed") if where == "repo" else \
                (ctx.main, "/embed")
            attacked = ctx.xlmr if where == "xlmr" else server
            measured = {}
            before = attacked.rss_mb()
            peak = [before]
            sampling = threading.Event()

            def sample():
                while not sampling.wait(0.05):
                    try:
                        peak[0] = max(peak[0], attacked.rss_mb())
                    except OSError:
                        return

            sampler = threading.Thread(target=sample)
            sampler.start()

            def measure():
                measured["times"] = normal_client(server, args.requests, path)

            print(f"[hostile] {title}", flush=True)
            outcome, ok = case(ctx, measure)
            sampling.set()
            sampler.join()
            time.sleep(1)
            after = attacked.rss_mb()
            up = all(s.up() for s in servers)
            times, failed = measured["times"]
            rss = (before, peak[0], after)
            rows.append((title, (times, failed), outcome, rss, ok and up and failed == 0))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(ctx.repo.dir, ignore_errors=True)

    lines = ["| run | normal client p50 ms | p99 ms | its failed requests | the attack got | "
             "server RSS MB: before / peak / 1 s after | pass |",
             "|---|---:|---:|---:|---|---|---|"]
    for title, (times, failed), outcome, rss, ok in rows:
        mem = "" if rss is None else f"{rss[0]:.0f} / {rss[1]:.0f} / {rss[2]:.0f}"
        lines.append(f"| {title} | {statistics.median(times):.2f} | {quantile(times, 0.99):.2f} "
                     f"| {failed} | {outcome} | {mem} | {'yes' if ok else 'NO'} |")
    table = "\n".join(lines)
    print(table)
    now = datetime.datetime.now(datetime.timezone.utc)
    command = "python3 bench/hostile_clients.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in (("requests", args.requests),
                                                     ("only", args.only)) if v)
    section = f"""
## Hostile and careless clients (issues 29 and 44, {now:%Y-%m-%d})

- date: {now:%Y-%m-%d %H:%M} UTC
- machine: {os.cpu_count()} CPUs ({platform.machine()}), {platform.platform()}
- command: `{command}` (servers on the CPU: `bertrt serve <all-MiniLM-L6-v2> --api-key ... --http-thread-count 8 --http-max-threads 128 --http-header-timeout {args.header_timeout:g}`, `bertrt serve tests/data/models/seq_cls`, `bertrt serve tests/data/models/xlmr_sentence_mean --max-payload-bytes 16777216`, and a repository in poll mode every 1 s; clients on the same machine; the memory column is the attacked server's)
- anchors measured in the same run: the normal client alone on each server (first rows)

{table}
"""
    if args.results:
        with open(args.results, "a") as f:
            f.write(section)
    failed_rows = [r[0] for r in rows if not r[4]]
    print("all rows passed" if not failed_rows else f"FAILED: {failed_rows}")
    return 1 if failed_rows else 0


if __name__ == "__main__":
    sys.exit(main())

"""What the server tests share: the real `bertrt serve` on free ports (HTTP and
gRPC), a per-module fixture that starts each configuration once, and the
reference outputs of `bertrt run`."""
import json
import signal
import socket
import ssl
import subprocess

import numpy as np
import pytest
import requests

from conftest import ROOT, free_port, run_jsonl, wait_until_ready  # noqa: F401 (free_port: for the tests)

MODELS = ROOT / "tests/data/models"
TEXTS = ["hello world", "the quick brown fox jumps", "今天天气很好", "a b c d e f g"]


class Server:
    def __init__(self, binary, args, grpc=True, tls_ca=None):
        """tls_ca: the CA (here the self-signed certificate) to verify HTTPS with, when the
        args hold --tls-cert/--tls-key."""
        self.port = free_port()
        self.grpc_port = free_port() if grpc else 0  # 0: gRPC off
        self.verify = tls_ca if tls_ca else True
        self.url = f"{'https' if tls_ca else 'http'}://127.0.0.1:{self.port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"
        self.proc = subprocess.Popen([binary, "serve", *args, "--http-port", str(self.port),
                                      "--grpc-port", str(self.grpc_port), "--threads", "1"],
                                     stderr=subprocess.PIPE, text=True)
        wait_until_ready(self.proc, self.url, self.verify)

    def post(self, path, body):
        return requests.post(self.url + path, json=body, timeout=60, verify=self.verify)

    def raw_post(self, path, body, send_bytes=None):
        """A raw socket (TLS when the server serves HTTPS) that has sent POST path
        with the JSON body, or only the first send_bytes bytes of the whole request:
        for clients that stall or vanish."""
        payload = json.dumps(body).encode()
        request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload
        c = socket.create_connection(("127.0.0.1", self.port))
        if self.verify is not True:  # a CA file: HTTPS
            c = ssl.create_default_context(cafile=self.verify).wrap_socket(
                c, server_hostname="127.0.0.1")
        c.sendall(request if send_bytes is None else request[:send_bytes])
        return c

    def metric(self, line_prefix):
        """The value of the first /metrics line that starts with line_prefix (0 if none)."""
        for line in requests.get(self.url + "/metrics", timeout=10, verify=self.verify).text.splitlines():
            if line.startswith(line_prefix):
                return float(line.split()[-1])
        return 0.0

    def alive(self):
        return self.proc.poll() is None and \
            requests.get(self.url + "/v2/health/ready", timeout=5,
                         verify=self.verify).status_code == 200

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0, self.proc.stderr.read()


@pytest.fixture(scope="module")
def servers(bertrt_bin, default_model):
    """servers(model, *extra_args): the server for that configuration, started once per module."""
    started = {}

    def get(model, *extra):
        key = (model, extra)
        if key not in started:
            path = default_model if model == "default" else str(MODELS / model)
            started[key] = Server(bertrt_bin, [path, *extra])
        return started[key]

    yield get
    for server in started.values():
        server.stop()


def run_outputs(bertrt_bin, model_path, texts):
    _, out, _ = run_jsonl(bertrt_bin, ["run", model_path], [{"text": t} for t in texts])
    return out


def close(a, b, tol=1e-4):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.allclose(a, b, atol=tol * max(1.0, np.abs(b).max()), rtol=0)

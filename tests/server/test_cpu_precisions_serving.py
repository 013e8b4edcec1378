"""Serving reduced precision on the CPU: int8 instances share one calibration, an int8 plan
serves as built, and /info names what each computes in."""
import signal
import subprocess

import numpy as np
import requests

from conftest import run_jsonl
from server_util import Server, TEXTS


def stop(server):
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    return server.proc.stderr.read()


def embeddings(server):
    r = requests.post(server.url + "/embed", json={"inputs": TEXTS}, timeout=60)
    assert r.status_code == 200, r.text
    return np.asarray(r.json(), dtype=np.float32)


def test_int8_instances_share_one_calibration(bertrt_bin, default_model):
    server = Server(bertrt_bin, [default_model, "--precision", "int8", "--instances", "2"],
                    grpc=False)
    try:
        info = requests.get(server.url + "/info", timeout=10).json()
        assert info["model_dtype"] == "int8" and info["device"] == "cpu int8 x2", info
        got = embeddings(server)
    finally:
        err = stop(server)
    assert err.count("calibrating on bertrt's built-in corpus") == 1, err
    assert err.count("int8 GEMMs in 22 of 24 Linears") == 2, err  # each instance's report
    _, want, _ = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "int8"],
                           [{"text": t} for t in TEXTS])
    np.testing.assert_allclose(got, [r["embedding"] for r in want], rtol=0, atol=1e-6)


def test_int8_plan_serves_as_built(bertrt_bin, default_model, tmp_path):
    plan = tmp_path / "minilm-int8.plan"
    subprocess.run([bertrt_bin, "build", default_model, "--precision", "int8", "-o", str(plan)],
                   check=True, capture_output=True, timeout=600)
    server = Server(bertrt_bin, [str(plan)], grpc=False)
    try:
        assert requests.get(server.url + "/info", timeout=10).json()["model_dtype"] == "int8"
        got = embeddings(server)
    finally:
        err = stop(server)
    assert "calibrating" not in err and "int8 check: the answers" in err, err
    _, want, _ = run_jsonl(bertrt_bin, ["run", str(plan)], [{"text": t} for t in TEXTS])
    np.testing.assert_allclose(got, [r["embedding"] for r in want], rtol=0, atol=1e-6)

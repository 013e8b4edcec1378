"""Shared pytest fixtures: the real bertrt binary and the default model."""
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def bertrt_bin():
    path = Path(os.environ.get("BERTRT_BIN", ROOT / "build/bertrt"))
    if not path.exists():
        pytest.fail(f"{path} not found: build first (bash scripts/build.sh) or set BERTRT_BIN")
    return str(path)


@pytest.fixture(scope="session")
def default_model():
    path = Path(os.environ.get("BERTRT_DEFAULT_MODEL_DIR", ROOT / "models/all-MiniLM-L6-v2"))
    if not (path / "model.safetensors").exists():
        pytest.fail(f"{path} not found: run bash scripts/fetch_default_model.sh")
    return str(path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_ready(proc, url, verify=True):
    """Waits until `proc` (a starting `bertrt serve`) answers GET url/v2/health/ready with 200;
    fails with its stderr if it exits first. No deadline: a busy machine's slow start must not
    fail a test (benchmarks time starts), and CI's own limit stops a server that hangs."""
    import requests
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else f"exit {proc.returncode}"
        try:
            if requests.get(url + "/v2/health/ready", timeout=1, verify=verify).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)


def run_jsonl(binary, args, records, check_exit=0):
    """Runs `bertrt <args>` with JSON Lines on stdin; returns (exit code, records, stderr)."""
    stdin = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)
    proc = subprocess.run([binary, *args], input=stdin.encode(), capture_output=True, timeout=600)
    out = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    if check_exit is not None:
        assert proc.returncode == check_exit, proc.stderr.decode()
    return proc.returncode, out, proc.stderr.decode()


def pipeline_mismatch(got, want, where="", tolerance=1e-5):
    """Where an entity or answer list `got` differs from an HF pipeline's `want`, or None:
    labels, words, offsets and answers equal, scores within `tolerance` (1e-5: probabilities
    from the CPU's fp32 forward, which matches transformers' within 1e-5 of the logits:
    tests/models/test_goldens.py)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or got.keys() != want.keys():
            return f"{where}: keys {sorted(got) if isinstance(got, dict) else got}, expected {sorted(want)}"
        for k in want:
            if (m := pipeline_mismatch(got[k], want[k], f"{where}.{k}", tolerance)):
                return m
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: {json.dumps(got, ensure_ascii=False)[:300]}, expected {len(want)} items"
        for i, (g, w) in enumerate(zip(got, want)):
            if (m := pipeline_mismatch(g, w, f"{where}[{i}]", tolerance)):
                return m
        return None
    if isinstance(want, float):
        return None if abs(got - want) <= tolerance else f"{where}: {got}, expected {want}"
    return None if got == want else f"{where}: {got!r}, expected {want!r}"


def have_gpu():
    """Whether an NVIDIA GPU is here (the CUDA tests run on the GPU machine's scripts)."""
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False

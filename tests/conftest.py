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


# Only against a server that hangs for good: a busy machine's slow start must not fail a
# test, so this is no bound on how fast a server starts (benchmarks measure that).
HANG_GUARD_S = 600


def wait_until_ready(proc, url, verify=True):
    """Waits until `proc` (a starting `bertrt serve`) answers GET url/v2/health/ready with 200;
    fails with its stderr if it exits first."""
    import requests
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else f"exit {proc.returncode}"
        try:
            if requests.get(url + "/v2/health/ready", timeout=1, verify=verify).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, f"{url} neither became ready nor exited"
        time.sleep(0.1)


def run_jsonl(binary, args, records, check_exit=0):
    """Runs `bertrt <args>` with JSON Lines on stdin; returns (exit code, records, stderr)."""
    stdin = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)
    proc = subprocess.run([binary, *args], input=stdin.encode(), capture_output=True, timeout=600)
    out = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    if check_exit is not None:
        assert proc.returncode == check_exit, proc.stderr.decode()
    return proc.returncode, out, proc.stderr.decode()

"""Shared pytest fixtures: the real bertrt binary and the default model."""
import json
import os
import subprocess
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


def run_jsonl(binary, args, records, check_exit=0):
    """Runs `bertrt <args>` with JSON Lines on stdin; returns (exit code, records, stderr)."""
    stdin = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)
    proc = subprocess.run([binary, *args], input=stdin.encode(), capture_output=True, timeout=600)
    out = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    if check_exit is not None:
        assert proc.returncode == check_exit, proc.stderr.decode()
    return proc.returncode, out, proc.stderr.decode()

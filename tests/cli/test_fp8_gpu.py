"""fp8 on the GPU (needs a GPU: skipped without nvidia-smi; scripts/device_fp8.sh runs it on
the GPU machine): the CUDA engine's FP8 GEMMs answer as the CPU's emulation of them, which the
accuracy report was measured on (the check at load holds them to it, and so do these tests),
from a model directory calibrated at load and from an fp8 plan built on the CPU."""
import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run_jsonl

pytestmark = pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs a GPU")

MODELS = ROOT / "tests/data/models"
TEXTS = [f"text {i}: " + "word " * (i % 23) + "end" for i in range(40)]


def cosines(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.parametrize("model,output", [("sentence_mean", "embedding"), ("seq_cls", "logits")])
def test_gpu_fp8_answers_as_the_cpu_emulation(bertrt_bin, model, output):
    records = [{"text": t} for t in TEXTS]
    path = str(MODELS / model)
    _, cpu, _ = run_jsonl(bertrt_bin, ["run", path, "--precision", "fp8"], records)
    _, gpu, err = run_jsonl(bertrt_bin, ["run", path, "--device", "cuda", "--precision", "fp8"],
                            records)
    assert "fp8 check: the answers of the engine that quantized the model reproduced" in err, err
    assert "fp8 GEMMs in" in err, err
    c = cosines([r[output] for r in gpu], [r[output] for r in cpu])
    # The GPU adds fp16 activations around the same E4M3 products: bf16's bound.
    assert c.min() >= 0.999, c.min()


def test_fp8_plan_built_on_the_cpu_runs_on_the_gpu(bertrt_bin, tmp_path):
    plan = tmp_path / "fp8.plan"
    proc = subprocess.run([bertrt_bin, "build", str(MODELS / "seq_cls"), "--precision", "fp8",
                           "--device", "cuda", "-o", str(plan)], capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    records = [{"text": t} for t in TEXTS]
    _, cpu, _ = run_jsonl(bertrt_bin, ["run", str(plan)], records)
    _, gpu, err = run_jsonl(bertrt_bin, ["run", str(plan), "--device", "cuda"], records)
    assert "calibrating" not in err and "fp8 check" in err, err
    same = sum(np.argmax(g["logits"]) == np.argmax(c["logits"]) for g, c in zip(gpu, cpu))
    assert same >= len(records) - 1, same
    out = subprocess.run([bertrt_bin, "bench", str(plan), "--device", "cuda", "--batch-size", "4",
                          "--seq-len", "32", "--iterations", "5", "--json"], capture_output=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.decode().strip().splitlines()[-1])["precision"] == "fp8"

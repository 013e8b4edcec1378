"""fp8 on the GPU (needs a GPU: skipped without nvidia-smi; scripts/device_fp8.sh runs it on
the GPU machine): the CUDA engine's FP8 GEMMs answer as the CPU's emulation of them, which the
accuracy report was measured on (the check at load holds them to it, and so do these tests),
from a model directory calibrated at load and from an fp8 plan built on the CPU; on trained
weights at their real depth, the GPU's answers are as close to fp32's as the emulation's."""
import json
import os
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


# The fp8 engine as it runs (every quantization made by the pass before it:
# Tuning::fused_quantization, the LayerNorm's and the GELU's), and with a quantization pass
# of its own before each FP8 GEMM.
FUSIONS = pytest.mark.parametrize("fused", ["0", "1"])


@FUSIONS
@pytest.mark.parametrize("model,output", [("sentence_mean", "embedding"), ("seq_cls", "logits")])
def test_gpu_fp8_answers_as_the_cpu_emulation(bertrt_bin, monkeypatch, model, output, fused):
    monkeypatch.setenv("BERTRT_FUSED_QUANTIZATION", fused)
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


@FUSIONS
def test_gpu_fp8_on_trained_weights_is_as_close_to_fp32_as_the_emulation(bertrt_bin, monkeypatch,
                                                                          default_model, fused):
    """all-MiniLM-L6-v2 on the tokenizer corpus's texts (every GEMM of its 6 layers in FP8 at
    its real width): the GPU rounds fp16 activations onto E4M3 where the emulation rounded
    fp32 ones, so the two part by a fraction of fp8's own error, not by a rounding; each is held
    against fp32 at twice the emulation's angle (the load check's bound)."""
    monkeypatch.setenv("BERTRT_FUSED_QUANTIZATION", fused)
    corpus = ROOT / "tests/data/tokenizer/corpus.jsonl"
    # The first 96 (the texts whose tokens the GPU machine's shrunk copy keeps), less the
    # empty one, which `bertrt run` refuses.
    texts = [json.loads(line)["text"] for line in corpus.open(encoding="utf-8")][:96]
    records = [{"text": t} for t in texts if t]
    _, fp32, _ = run_jsonl(bertrt_bin, ["run", default_model], records)
    _, emulated, _ = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "fp8"], records)
    _, gpu, err = run_jsonl(bertrt_bin, ["run", default_model, "--device", "cuda", "--precision",
                                         "fp8"], records)
    assert "fp8 check: " in err and "fp8 GEMMs in" in err, err
    want = [r["embedding"] for r in fp32]
    emu_c = cosines([r["embedding"] for r in emulated], want)
    gpu_c = cosines([r["embedding"] for r in gpu], want)
    print(f"against fp32: emulation mean {emu_c.mean():.5f} min {emu_c.min():.5f}; "
          f"GPU mean {gpu_c.mean():.5f} min {gpu_c.min():.5f}")
    assert emu_c.max() < 1 - 1e-7 and gpu_c.max() < 1 - 1e-7, "the fp8 GEMMs ran"
    # Twice the angle: 1 - cos grows four times.
    assert 1 - gpu_c.mean() <= 4 * (1 - emu_c.mean()), (gpu_c.mean(), emu_c.mean())
    assert gpu_c.min() >= 2 * emu_c.min() ** 2 - 1, (gpu_c.min(), emu_c.min())


@pytest.mark.parametrize("model,precision", [("sentence_mean", "fp8"), ("seq_cls", "fp8"),
                                             ("default", "fp8"), ("default", "int8")])
def test_fused_quantization_answers_the_same(bertrt_bin, request, model, precision):
    """BERTRT_FUSED_QUANTIZATION (the LayerNorm's and, fp8, the erf GELU's passes making the
    next 8-bit GEMM's input) puts the same bytes into every 8-bit GEMM as a quantization pass
    of its own: the same answers, bit for bit (all-MiniLM-L6-v2 at its real width too; the
    tiny models' widths are not the int8 GEMM's)."""
    path = (request.getfixturevalue("default_model") if model == "default"
            else str(MODELS / model))
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in TEXTS).encode()
    answers = []
    for fused in ("0", "1"):
        env = dict(os.environ, BERTRT_FUSED_QUANTIZATION=fused)
        proc = subprocess.run([bertrt_bin, "run", path, "--device", "cuda", "--precision",
                               precision], input=stdin, capture_output=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr.decode()
        answers.append(proc.stdout)
    assert answers[0] == answers[1]


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

"""int8 on the GPU (needs a GPU: skipped without nvidia-smi; scripts/device_fp8.sh runs it on
the GPU machine): the CUDA engine's int8 GEMMs (Hopper's integer tensor cores) take the CPU
engine's int8 operands and arithmetic, which the accuracy report was measured on. On trained
weights at their real width (all-MiniLM-L6-v2: 384 -> 1536), from a model directory calibrated
at load and from an int8 plan built on the CPU, the GPU answers as the CPU's int8 engine does
(the check at load holds it to that, and so do these tests), and as close to fp32's."""
import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run_jsonl

pytestmark = pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs a GPU")

MODELS = ROOT / "tests/data/models"


def cosines(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def corpus_records():
    # The first 96 (the texts whose tokens the GPU machine's shrunk copy keeps), less the
    # empty one, which `bertrt run` refuses.
    corpus = ROOT / "tests/data/tokenizer/corpus.jsonl"
    texts = [json.loads(line)["text"] for line in corpus.open(encoding="utf-8")][:96]
    return [{"text": t} for t in texts if t]


@pytest.mark.parametrize("method", ["token", "max"])
def test_gpu_int8_answers_as_the_cpu_int8_engine(bertrt_bin, default_model, method):
    """Per token (uint8 with each row's range) and per tensor (calibrated max, signed): the
    CPU's quantization and integer sums, the GPU's other operations in fp16. The GPU rounds
    fp16 activations onto the int8 grid where the CPU rounded fp32 ones, so a fraction of the
    roundings land on the other neighbour (on the H100 the two parted to cosine 0.997 on one
    of these texts): each is one draw of int8's error, and the GPU's is held against fp32 at
    twice the CPU's angle (the load check's bound)."""
    records = corpus_records()
    calibrate = ["--calibration", method]
    _, fp32, _ = run_jsonl(bertrt_bin, ["run", default_model], records)
    _, cpu, _ = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "int8", *calibrate],
                          records)
    _, gpu, err = run_jsonl(bertrt_bin, ["run", default_model, "--device", "cuda", "--precision",
                                         "int8", *calibrate], records)
    assert "int8 check: " in err and "int8 GEMMs in" in err, err
    gpu_e, cpu_e = [r["embedding"] for r in gpu], [r["embedding"] for r in cpu]
    want = [r["embedding"] for r in fp32]
    cpu_c, gpu_c = cosines(cpu_e, want), cosines(gpu_e, want)
    print(f"{method}: against fp32, CPU int8 mean {cpu_c.mean():.5f} min {cpu_c.min():.5f}; "
          f"GPU int8 mean {gpu_c.mean():.5f} min {gpu_c.min():.5f}")
    assert gpu_c.max() < 1 - 1e-7, "the int8 GEMMs ran"
    # Twice the angle at most (the load check's bound): 1 - cos grows four times.
    assert 1 - gpu_c.mean() <= 4 * (1 - cpu_c.mean()), (gpu_c.mean(), cpu_c.mean())
    assert gpu_c.min() >= 2 * cpu_c.min() ** 2 - 1, (gpu_c.min(), cpu_c.min())


def test_int8_plan_built_on_the_cpu_runs_on_the_gpu(bertrt_bin, default_model, tmp_path):
    plan = tmp_path / "int8.plan"
    proc = subprocess.run([bertrt_bin, "build", default_model, "--precision", "int8", "--device",
                           "cuda", "--calibrate-samples", "64", "-o", str(plan)],
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    records = corpus_records()[:32]
    _, cpu, _ = run_jsonl(bertrt_bin, ["run", str(plan)], records)
    _, gpu, err = run_jsonl(bertrt_bin, ["run", str(plan), "--device", "cuda"], records)
    assert "calibrating" not in err and "int8 check" in err, err
    c = cosines([r["embedding"] for r in gpu], [r["embedding"] for r in cpu])
    # Two draws of int8's error (above), each within the default budget's 0.99 of fp32's.
    assert c.min() >= 2 * 0.99 ** 2 - 1, c.min()
    out = subprocess.run([bertrt_bin, "bench", str(plan), "--device", "cuda", "--batch-size", "4",
                          "--seq-len", "32", "--iterations", "5", "--json"], capture_output=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.decode().strip().splitlines()[-1])["precision"] == "int8"


def test_int8_of_widths_the_gpu_gemm_does_not_take_is_refused_clearly(bertrt_bin):
    """The tiny model's FFN is 32 -> 37: the GPU's int8 GEMM takes multiples of 16. A clear
    refusal that names the Linear and the way out, never a wrong answer."""
    proc = subprocess.run([bertrt_bin, "run", str(MODELS / "seq_cls"), "--device", "cuda",
                           "--precision", "int8"], input=b'{"text": "x"}\n', capture_output=True,
                          timeout=300)
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "multiples of 16" in err and "--device cpu" in err, err

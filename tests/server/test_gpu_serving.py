"""GPU and CPU instances of one model side by side (needs a GPU: skipped
without nvidia-smi; scripts/device_serve.sh runs it on the GPU machine): one
queue feeds both, both compute, answers match the CPU engine's, and /metrics
shows each instance and the GPUs' memory through NVML."""
import shutil
import subprocess
import threading

import numpy as np
import pytest
import requests

from server_util import MODELS, Server, run_outputs

pytestmark = pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs a GPU")


def test_gpu_and_cpu_instances_share_one_queue(bertrt_bin, tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    for f in (MODELS / "seq_cls").iterdir():
        (tmp_path / "m" / "1" / f.name).symlink_to(f)
    (tmp_path / "m" / "config.pbtxt").write_text(
        "max_batch_size: 2\n"
        "instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0 ] }, { count: 1 kind: KIND_CPU } ]\n")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path)])
    try:
        assert requests.get(s.url + "/info").json()["device"] == "cuda:0 fp16 x1, cpu fp32 x1"
        texts = [f"request {i} " + "word " * (i % 11) for i in range(96)]
        want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), texts)]
        got = [None] * len(texts)

        def one(i):
            body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                                "data": [texts[i]]}]}
            r = s.post("/v2/models/m/infer", body)
            assert r.status_code == 200, r.text
            got[i] = r.json()["outputs"][0]["data"]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(texts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for g, w in zip(got, want):
            assert np.allclose(g, w, atol=2e-2), (g, w)
        metrics = requests.get(s.url + "/metrics").text
        batches = {line.split('instance="')[1].split('"')[0]: float(line.split()[-1])
                   for line in metrics.splitlines()
                   if line.startswith("bertrt_instance_batches_total{")}
        assert set(batches) == {"cuda:0", "cpu"} and min(batches.values()) > 0, batches
        assert 'bertrt_gpu_memory_used_bytes{gpu="0"}' in metrics
    finally:
        s.stop()


def test_gpu_engines_pass_a_self_check_before_use(bertrt_bin, default_model):
    """`run` and `serve` check each CUDA engine against the CPU engine in fp32 on
    built-in samples first (tests/unit/self_check_test.cc refuses a broken one);
    --skip-verify goes without."""
    line = '{"text": "bertrt is fast"}\n'
    ran = subprocess.run([bertrt_bin, "run", default_model, "--device", "cuda"], input=line,
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "self-check against the CPU engine in fp32 passed (max abs diff" in ran.stderr
    skipped = subprocess.run([bertrt_bin, "run", default_model, "--device", "cuda",
                              "--skip-verify"], input=line, capture_output=True, text=True)
    assert skipped.returncode == 0 and "self-check" not in skipped.stderr, skipped.stderr
    s = Server(bertrt_bin, [default_model, "--device", "cuda"])
    s.stop()
    assert "self-check on cuda:0 against the CPU engine in fp32 passed" in s.proc.stderr.read()

"""Hostile and careless inputs against the real binary (issue 29): none may crash
the process or hang it; each gets an error that says what was wrong."""
import json
import os
import shutil
import struct
import subprocess

import pytest
import requests

from server_util import MODELS, Server, servers  # noqa: F401


def deep_json(levels, inner='"x"'):
    return "[" * levels + inner + "]" * levels


@pytest.mark.parametrize("path", ["/v2/models/seq_cls/infer", "/embed", "/predict",
                                  "/v1/embeddings", "/tokenize"])
def test_deeply_nested_json_is_refused_and_the_server_stays_up(servers, path):
    """A KServe `data` nested 60,000 levels deep (a 120 KB body) overflowed the stack
    walking it; every JSON body is now refused past 64 levels, before parsing."""
    s = servers("seq_cls")
    kserve = json.dumps({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                                     "data": "@"}]}).replace('"@"', deep_json(60000))
    body = kserve if path.startswith("/v2") else '{"inputs": ' + deep_json(60000) + "}"
    r = requests.post(s.url + path, data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert "nested deeper than 64 levels" in r.json()["error"]
    assert s.alive()
    # Nesting a request needs still works: KServe data nested to its shape.
    ok = requests.post(s.url + "/v2/models/seq_cls/infer", json={"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [2, 1], "data": [["a b"], ["c"]]}]})
    assert ok.status_code == 200, ok.text


def poisoned_copy(src, dst, tensor, index=0, value=float("nan")):
    """A copy of model directory `src` with one value of `tensor` replaced."""
    shutil.copytree(src, dst)
    path = dst / "model.safetensors"
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    entry = json.loads(data[8:8 + n])[tensor]
    assert entry["dtype"] == "F32"
    at = 8 + n + entry["data_offsets"][0] + 4 * index
    data[at:at + 4] = struct.pack("<f", value)
    path.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_at_load_naming_the_tensor(bertrt_bin, tmp_path, value):
    tensor = "bert.encoder.layer.1.attention.self.query.weight"
    model = poisoned_copy(MODELS / "seq_cls", tmp_path / "m", tensor, index=5, value=value)
    line = '{"text": "hello"}\n'
    for args in (["run", str(model)], ["build", str(model), "-o", str(tmp_path / "m.plan")],
                 ["serve", str(model), "--http-port", "0", "--grpc-port", "0"]):
        proc = subprocess.run([bertrt_bin, *args], input=line, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 3, (args, proc.stderr)
        assert f"{tensor} in model.safetensors holds 1 NaN or infinite value" in proc.stderr, \
            proc.stderr
        assert "first at flat index 5" in proc.stderr
    assert not (tmp_path / "m.plan").exists()
    # Plans: tests/unit/plan_test.cc (Plan.NonFiniteWeightsAreRefused).


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "vocab.txt"])
def test_a_fifo_in_place_of_a_model_file_is_refused_not_waited_on(bertrt_bin, tmp_path, name):
    """A FIFO blocked open() forever: `run` hung and `serve` ignored SIGTERM."""
    model = tmp_path / "m"
    shutil.copytree(MODELS / "seq_cls", model)
    (model / name).unlink()
    os.mkfifo(model / name)
    proc = subprocess.run([bertrt_bin, "run", str(model)], input='{"text": "x"}\n',
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3, proc.stderr
    assert f"{name} is a FIFO, not a regular file" in proc.stderr, proc.stderr
    serve = subprocess.Popen([bertrt_bin, "serve", str(model), "--http-port", "0",
                              "--grpc-port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        assert serve.wait(timeout=30) == 3
        assert "is a FIFO" in serve.stderr.read()
    finally:
        if serve.poll() is None:
            serve.kill()


@pytest.mark.parametrize("name", [".", ".."])
def test_unload_takes_only_model_names(bertrt_bin, tmp_path, name):
    """`unload` accepted "." and ".." (directories of the repository's own path) and
    listed them in the index afterwards."""
    import http.client
    target = tmp_path / "cls" / "1"
    shutil.copytree(MODELS / "seq_cls", target)
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode",
                            "explicit", "--load-model", "cls"])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        # http.client sends the path as written (requests would resolve the dots).
        conn.request("POST", f"/v2/repository/models/{name}/unload")
        r = conn.getresponse()
        assert r.status == 404, r.read()
        assert "not in the repository" in json.loads(r.read())["error"]
        index = requests.post(s.url + "/v2/repository/index").json()
        assert [e["name"] for e in index] == ["cls"], index
        assert index[0]["state"] == "READY"
    finally:
        s.stop()

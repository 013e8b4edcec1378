"""Issue 44's defects, replayed against the real binary as an attacker or a careless
client would: each failed before its fix (a crash, memory the client controls, a
stalled server, information on an open route) and must now get a clear answer
while the server stays up and serves others. The gRPC port's own attacks are in
test_grpc_hostile.py; tokenizer memory in test_tokenizer_limits.py."""
import json
import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest
import requests

from http_attacks import chunked_flood, kserve_ids, rss_mb
from server_util import MODELS, Server, servers  # noqa: F401
from test_repository import add_version

KEY = "hardening-key"


@pytest.mark.parametrize("with_key", [False, True])
def test_a_long_model_name_is_refused_not_a_crash(bertrt_bin, with_key):
    """D1: GET /v2/models/<40,000 x "a">/config killed the server (stack overflow in
    std::regex) before the API key was checked; routes are now matched by a path
    parser, and a target past 8 KiB is a 414."""
    s = Server(bertrt_bin, [str(MODELS / "seq_cls")] + (["--api-key", KEY] if with_key else []))
    try:
        long_name = "a" * 40000
        for method, path in [("GET", f"/v2/models/{long_name}/config"),
                             ("POST", f"/models/{long_name}/embed"),
                             ("POST", f"/v2/repository/models/{long_name}/load"),
                             ("GET", f"/models/{long_name}/health")]:
            body = {"inputs": "x"} if method == "POST" else None
            r = requests.request(method, s.url + path, json=body, timeout=30)
            assert r.status_code == 414, (path[:30], r.status_code, r.text[:200])
            assert "longer than 8192 bytes" in r.text
        # Under the limit: an unknown model (404), or 401 first without the key.
        r = requests.get(s.url + "/v2/models/" + "b" * 5000 + "/config", timeout=30)
        assert r.status_code == (401 if with_key else 404), r.text[:200]
        assert s.alive()
    finally:
        s.stop()


def test_wrong_methods_get_405_with_allow_and_health_bodies_are_kserves(servers):
    """TEI answers 405 with Allow for a wrong method (we answered 404 or 400); KServe's
    SDK reads {"live": true} and {"ready": true} (we answered {})."""
    s = servers("seq_cls")
    r = requests.get(s.url + "/embed", timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "POST", (r.status_code, r.headers)
    assert r.json()["error_type"] == "Validation"  # TEI's error shape on a TEI route
    r = requests.post(s.url + "/v2/health/ready", timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    r = requests.delete(s.url + "/v2/models/seq_cls", timeout=10)
    assert r.status_code == 405 and "DELETE is not allowed" in r.json()["error"]
    assert requests.get(s.url + "/no/such/route", timeout=10).status_code == 404
    assert requests.get(s.url + "/v2/health/live", timeout=10).json() == {"live": True}
    assert requests.get(s.url + "/v2/health/ready", timeout=10).json() == {"ready": True}
    assert requests.head(s.url + "/v2/health/ready", timeout=10).status_code == 200


@pytest.mark.parametrize("where", ["trailer", "extension"])
def test_chunked_trailers_and_extensions_are_bounded(servers, where):
    """D2: a chunked body's trailer (or a chunk extension) was buffered whole, outside
    --max-payload-bytes: 400 MB of it took +2 GB RSS, kept. Both are now cut off at
    80 KiB with a 400."""
    s = servers("seq_cls")
    before = rss_mb(s.proc.pid)
    status = chunked_flood(s.port, where, 20, path="/predict")
    assert status == 400, status
    assert rss_mb(s.proc.pid) - before < 50
    assert s.post("/predict", {"inputs": "still served"}).status_code == 200


@pytest.mark.parametrize("shape", [[10000000, 0], [2 ** 40, 0], [0, 3]])
def test_shapes_are_checked_before_anything_is_allocated(servers, shape):
    """D3: input_ids [10000000, 0] with data [] (a 100-byte body) took 2.2 s and
    +1.1 GB; [2^40, 0] 28 s of allocation, then 500."""
    s = servers("seq_cls")
    before = rss_mb(s.proc.pid)
    r = s.post("/v2/models/seq_cls/infer", kserve_ids(shape, []))
    assert r.status_code == 400, r.text
    assert "dimension below 1" in r.json()["error"]
    assert rss_mb(s.proc.pid) - before < 50
    r = s.post("/v2/models/seq_cls/infer", kserve_ids([2049, 1], [2] * 2049))
    assert r.status_code == 413 and "max_client_batch_size" in r.json()["error"], r.text


def test_per_token_outputs_are_sized_by_the_tokens_run(servers):
    """D4: input_ids [1, 200000] with truncate and output last_hidden_state answered
    200,000 rows (a 307 MB answer to a 1 MB request, +4.5 GB RSS)."""
    s = servers("base")  # max length 64, hidden 32
    n = 20000
    r = s.post("/v2/models/base/infer",
               kserve_ids([1, n], [2] + [5] * (n - 2) + [3], outputs=["last_hidden_state"],
                          truncate=True))
    assert r.status_code == 200, r.text[:300]
    assert r.json()["outputs"][0]["shape"] == [1, 64, 32]
    # A mask keeping the first 3 tokens: 3 positions, not n.
    mask = [1, 1, 1] + [0] * (n - 3)
    r = s.post("/v2/models/base/infer",
               kserve_ids([1, n], [2, 5, 3] + [0] * (n - 3), mask=mask,
                          outputs=["last_hidden_state"]))
    assert r.status_code == 200, r.text[:300]
    assert r.json()["outputs"][0]["shape"] == [1, 3, 32]
    # A mask keeping a token far out would make the answer that large again: refused.
    mask = [1, 1] + [0] * (n - 3) + [1]
    r = s.post("/v2/models/base/infer",
               kserve_ids([1, n], [2, 5] + [0] * (n - 3) + [3], mask=mask,
                          outputs=["last_hidden_state"]))
    assert r.status_code == 400 and "past the model's max length 64" in r.json()["error"], r.text
    # Padded on the right as clients do: positions and zeros as before.
    r = s.post("/v2/models/base/infer",
               kserve_ids([2, 4], [2, 5, 6, 3, 2, 3, 0, 0], mask=[1, 1, 1, 1, 1, 1, 0, 0],
                          outputs=["last_hidden_state"]))
    out = np.array(r.json()["outputs"][0]["data"]).reshape(r.json()["outputs"][0]["shape"])
    assert out.shape == (2, 4, 32) and not out[1, 2:].any() and out[1, :2].any()


def test_one_empty_text_rule_for_both_texts_of_a_pair(servers):
    """D12: an empty second text was accepted while an empty first text was a 422."""
    r = servers("xlmr_reranker").post("/rerank", {"query": "q", "texts": ["a", ""]})
    assert r.status_code == 422 and "empty text" in r.json()["error"], r.text
    s = servers("seq_cls")
    for body in [{"inputs": [["a", ""]]}, {"inputs": [["", "a"]]}]:
        r = s.post("/predict", body)
        assert r.status_code == 422 and "empty text" in r.json()["error"], (body, r.text)
    r = s.post("/v2/models/seq_cls/infer", {"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a"]},
        {"name": "text_pair", "datatype": "BYTES", "shape": [1], "data": [""]}]})
    assert r.status_code == 400 and "empty text" in r.json()["error"], r.text


def test_triton_class_count_returns_top_k_classes(servers):
    """Triton's classification extension (tritonclient's class_count) was silently
    ignored; it now returns each row's top k as "value:index:label", largest first."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    s = servers("seq_cls")
    logits = np.array(s.post("/v2/models/seq_cls/infer", {"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [2], "data": ["hello world", "good day"]}]
    }).json()["outputs"][0]["data"], dtype=np.float32).reshape(2, 3)
    labels = ["CLASS_0", "CLASS_1", "CLASS_2"]
    for module, url in ((httpclient, s.url[len("http://"):]), (grpcclient, s.grpc_url)):
        client = module.InferenceServerClient(url)
        text = module.InferInput("text", [2], "BYTES")
        text.set_data_from_numpy(np.array([b"hello world", b"good day"], dtype=object))
        out = module.InferRequestedOutput("logits", class_count=2)
        got = client.infer("seq_cls", [text], outputs=[out]).as_numpy("logits")
        assert got.shape == (2, 2), got
        for row in range(2):
            order = np.argsort(-logits[row], kind="stable")[:2]
            want = [f"{logits[row][i]:f}:{i}:{labels[i]}".encode() for i in order]
            assert list(got[row]) == want, (got[row], want)


def test_triton_load_model_with_config_overrides_the_file(bertrt_bin, tmp_path):
    """tritonclient's load_model(config=...) was accepted and ignored: its settings
    now apply to that load (and a plain load goes back to config.pbtxt); model files
    sent with the request are refused by name."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
    add_version(tmp_path, "cls", 1, "seq_cls")
    (tmp_path / "cls" / "config.pbtxt").write_text("max_batch_size: 8\n")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode",
                            "explicit", "--load-model", "cls"])
    try:
        client = httpclient.InferenceServerClient(s.url[len("http://"):])
        assert client.get_model_config("cls")["max_batch_size"] == 8
        client.load_model("cls", config=json.dumps({"max_batch_size": 4}))
        assert client.get_model_config("cls")["max_batch_size"] == 4
        client.load_model("cls")
        assert client.get_model_config("cls")["max_batch_size"] == 8
        with pytest.raises(InferenceServerException, match="not a model configuration"):
            client.load_model("cls", config="{not json")
        with pytest.raises(InferenceServerException, match="model files are not taken"):
            client.load_model("cls", config=json.dumps({}), files={"file:1/x.bin": b"abc"})
        assert client.is_model_ready("cls")
    finally:
        s.stop()


def vocab_model_with(tmp_path, name, tokenizer_config):
    target = tmp_path / name / "1"
    shutil.copytree(MODELS / "seq_cls", target)
    (target / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return target


def test_a_wrong_typed_tokenizer_config_is_a_load_error(bertrt_bin, tmp_path):
    """D8: {"do_lower_case": "yes"} in tokenizer_config.json threw out of the loader:
    `serve` exited 134, dropping the file into a polled repository killed the running
    server, and so did POST .../load."""
    import subprocess
    bad = vocab_model_with(tmp_path / "single", "bad", {"do_lower_case": "yes"})
    proc = subprocess.run([bertrt_bin, "serve", str(bad), "--http-port", "0", "--grpc-port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert '"do_lower_case" must be true or false, not "yes"' in proc.stderr
    # Polled: the server stays up; the model is not served, and the index says why.
    repo = tmp_path / "repo"
    add_version(repo, "good", 1, "seq_cls")
    s = Server(bertrt_bin, ["--model-repository", str(repo), "--model-control-mode", "poll",
                            "--repository-poll-secs", "0.2"])
    try:
        vocab_model_with(repo, "bad", {"do_lower_case": "yes"})
        deadline = time.time() + 30
        index = {}
        while time.time() < deadline and index.get("bad", {}).get("reason", "not loaded") == \
                "not loaded":
            index = {e["name"]: e for e in requests.post(s.url + "/v2/repository/index").json()}
            time.sleep(0.2)
        assert index["bad"]["state"] == "UNAVAILABLE", index
        assert "do_lower_case" in index["bad"]["reason"]
        assert s.proc.poll() is None
        assert s.post("/v2/models/good/infer", {"inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]}).status_code == 200
    finally:
        s.stop()
    # Explicit: POST load answers 400 and the server stays up.
    repo = tmp_path / "explicit"
    add_version(repo, "good", 1, "seq_cls")
    vocab_model_with(repo, "bad", {"tokenize_chinese_chars": 1})
    s = Server(bertrt_bin, ["--model-repository", str(repo), "--model-control-mode", "explicit",
                            "--load-model", "good"])
    try:
        r = requests.post(s.url + "/v2/repository/models/bad/load", timeout=60)
        assert r.status_code == 400 and "tokenize_chinese_chars" in r.json()["error"], r.text
        assert str(repo) not in r.json()["error"]  # paths relative to the repository
        assert s.proc.poll() is None
    finally:
        s.stop()


def lookup_latencies_ms(url, n):
    session = requests.Session()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        assert session.get(url + "/v2/models/good/ready", timeout=60).status_code == 200
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)


def walk_and_stat_ms(folder):
    t0 = time.perf_counter()
    for entry in os.scandir(folder):
        entry.stat()
    return (time.perf_counter() - t0) * 1000


def test_the_poll_rescan_does_not_stall_requests(bertrt_bin, tmp_path):
    """D9: 60,000 small files in another model's version folder and a 1 s poll took a
    request's p99 from 8 ms to 457 ms: the folder walk held the lock every request's
    model lookup takes. The walk is now outside it: requests during rescans keep
    their latency (compared with the same server's before the files appear)."""
    add_version(tmp_path, "good", 1, "seq_cls")
    add_version(tmp_path, "big", 1, "seq_cls")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "poll",
                            "--repository-poll-secs", "0.05"], grpc=False)
    try:
        lookup_latencies_ms(s.url, 50)  # warm-up
        alone = lookup_latencies_ms(s.url, 400)
        junk = tmp_path / "big" / "1" / "junk"
        junk.mkdir()
        for i in range(60000):
            (junk / str(i)).write_bytes(b"x")
        time.sleep(1)  # the next rescans walk the 60,000 files, back to back
        during = lookup_latencies_ms(s.url, 400)
        p99 = lambda t: t[int(0.99 * (len(t) - 1))]  # noqa: E731
        # What one walk of the folder costs on this machine now (its load included):
        # under the lock, the lookups that met a walk waited for all of it.
        walk_ms = min(walk_and_stat_ms(junk) for _ in range(3))
        # p99 went from 0.9 to 128 ms here under the lock (a walk took ~150 ms);
        # beside the walk now, 0.8 to 4 ms. On a busy machine scheduling alone can
        # stretch the tail, so the bound is the larger of 15x the same server's own
        # p99 and a third of a walk: a lookup that waited for a walk passes neither.
        assert p99(during) < max(15 * p99(alone), walk_ms / 3), (p99(during), p99(alone), walk_ms)
    finally:
        s.stop()


def test_sighup_is_harmless(bertrt_bin, tmp_path):
    """D10: SIGHUP ended the server at once, dropping what was in flight. It is now
    logged and ignored (a single model), or rescans a polled repository."""
    s = Server(bertrt_bin, [str(MODELS / "seq_cls")], grpc=False)
    try:
        results = []
        texts = ["the quick brown fox jumps over the lazy dog"] * 32
        t = threading.Thread(target=lambda: results.append(s.post("/predict", {"inputs": texts})))
        t.start()
        time.sleep(0.05)
        s.proc.send_signal(signal.SIGHUP)
        t.join()
        assert results[0].status_code == 200
        assert s.alive()
    finally:
        s.stop()
    assert "SIGHUP ignored" in s.proc.stderr.read()
    # Polled: SIGHUP rescans now, however long the poll period.
    add_version(tmp_path, "one", 1, "seq_cls")
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode", "poll",
                            "--repository-poll-secs", "3600"], grpc=False)
    try:
        add_version(tmp_path, "two", 1, "seq_cls")
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 30
        while time.time() < deadline and requests.get(
                s.url + "/v2/models/two/ready", timeout=10).status_code != 200:
            time.sleep(0.1)
        assert requests.get(s.url + "/v2/models/two/ready", timeout=10).status_code == 200
    finally:
        s.stop()


def test_open_routes_reveal_nothing_but_liveness(bertrt_bin, tmp_path):
    """D11: with --api-key, GET /models/x/health listed the served models,
    /v2/health/ready after a failed load showed the repository's absolute path and the
    error, and NotFound messages named the repository's path."""
    add_version(tmp_path, "secret-model", 1, "seq_cls")
    vocab_model_with(tmp_path, "broken", {"do_lower_case": "yes"})
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path), "--model-control-mode",
                            "explicit", "--load-model", "secret-model", "--api-key", KEY])
    auth = {"Authorization": "Bearer " + KEY}
    try:
        assert requests.post(s.url + "/v2/repository/models/broken/load", headers=auth,
                             timeout=60).status_code == 400
        for path in ("/v2/health/ready", "/v2/health/live", "/health", "/ping", "/"):
            r = requests.get(s.url + path, timeout=10)
            assert "secret-model" not in r.text and str(tmp_path) not in r.text, (path, r.text)
            assert "do_lower_case" not in r.text
        assert requests.get(s.url + "/v2/health/ready", timeout=10).json() == {"ready": False}
        for path in ("/models/x/health", "/models/secret-model/health", "/metrics"):
            r = requests.get(s.url + path, timeout=10)
            assert r.status_code == 401 and "secret-model" not in r.text, (path, r.text)
        # Behind the key, errors name models but never the server's paths.
        for path in ("/v2/models/nope", "/v2/models/broken"):
            r = requests.get(s.url + path, headers=auth, timeout=10)
            assert r.status_code == 404 and str(tmp_path) not in r.text, r.text
        r = requests.post(s.url + "/v2/repository/models/nope/load", headers=auth, timeout=10)
        assert r.status_code == 404 and str(tmp_path) not in r.text, r.text
    finally:
        s.stop()

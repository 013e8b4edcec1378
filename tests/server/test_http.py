"""`bertrt serve` end to end: the real binary on a free port, driven by curl,
requests, tritonclient and the openai client; answers equal `bertrt run`."""
import json
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from conftest import run_jsonl
from server_util import MODELS, TEXTS, Server, close, free_port, run_outputs, servers  # noqa: F401

def test_kserve_metadata_and_health(servers):
    s = servers("seq_cls")
    assert requests.get(s.url + "/v2/health/live").status_code == 200
    meta = requests.get(s.url + "/v2/models/seq_cls").json()
    assert meta["name"] == "seq_cls" and meta["versions"] == ["1"]
    assert {"name": "logits", "datatype": "FP32", "shape": [-1, 3]} in meta["outputs"]
    assert requests.get(s.url + "/v2/models/seq_cls/versions/1/ready").json()["ready"] is True
    assert requests.get(s.url + "/v2").json()["name"] == "bertrt"


def test_kserve_text_logits_equal_run(servers, bertrt_bin):
    s = servers("seq_cls")
    r = s.post("/v2/models/seq_cls/versions/1/infer", {"id": "x", "inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [len(TEXTS), 1], "data": TEXTS}]})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["id"] == "x" and out["outputs"][0]["shape"] == [len(TEXTS), 3]
    want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), TEXTS)]
    assert close(np.reshape(out["outputs"][0]["data"], (len(TEXTS), 3)), want)


def test_tritonclient_input_ids_with_attention_mask(servers, bertrt_bin):
    import tritonclient.http as triton
    s = servers("token_cls")
    _, toks, _ = run_jsonl(bertrt_bin, ["tokenize", str(MODELS / "token_cls")], [{"text": t} for t in TEXTS])
    ids = [t["input_ids"] for t in toks]
    seq = max(map(len, ids))
    padded = np.array([i + [0] * (seq - len(i)) for i in ids], dtype=np.int64)
    mask = np.array([[1] * len(i) + [0] * (seq - len(i)) for i in ids], dtype=np.int64)
    client = triton.InferenceServerClient(f"127.0.0.1:{s.port}")
    assert client.is_model_ready("token_cls")
    inputs = [triton.InferInput("input_ids", list(padded.shape), "INT64"),
              triton.InferInput("attention_mask", list(mask.shape), "INT64")]
    inputs[0].set_data_from_numpy(padded, binary_data=False)
    inputs[1].set_data_from_numpy(mask, binary_data=False)
    result = client.infer("token_cls", inputs,
                          outputs=[triton.InferRequestedOutput("logits", binary_data=False)])
    logits = result.as_numpy("logits")
    assert logits.shape == (len(TEXTS), seq, 9)
    want = run_outputs(bertrt_bin, str(MODELS / "token_cls"), TEXTS)
    for i, w in enumerate(want):
        assert close(logits[i, :len(ids[i])], w["logits"])
        assert not logits[i, len(ids[i]):].any()


def test_qa_start_end_logits(servers, bertrt_bin):
    s = servers("qa")
    r = s.post("/v2/models/qa/infer", {"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["who is it"]},
        {"name": "text_pair", "datatype": "BYTES", "shape": [1], "data": ["it is me"]}]})
    assert r.status_code == 200, r.text
    outs = {o["name"]: o for o in r.json()["outputs"]}
    _, want, _ = run_jsonl(bertrt_bin, ["run", str(MODELS / "qa")], [{"text": "who is it", "text_pair": "it is me"}])
    n = len(want[0]["start_logits"])
    assert outs["start_logits"]["shape"] == [1, n]
    assert close(outs["start_logits"]["data"], want[0]["start_logits"])
    assert close(outs["end_logits"]["data"], want[0]["end_logits"])


def test_predict_and_rerank(servers, bertrt_bin):
    s = servers("seq_cls")
    want = run_outputs(bertrt_bin, str(MODELS / "seq_cls"), ["hello world"])[0]["logits"]
    exp = np.exp(np.array(want) - max(want))
    probs = exp / exp.sum()
    preds = s.post("/predict", {"inputs": "hello world"}).json()
    assert [p["score"] for p in preds] == sorted((p["score"] for p in preds), reverse=True)
    assert close([p["score"] for p in preds], sorted(probs, reverse=True))
    batch = s.post("/predict", {"inputs": [["a question", "an answer"], "plain"]}).json()
    assert len(batch) == 2 and len(batch[0]) == 3
    # A 3-label model is no reranker (TEI: 424); test_tei_api.py reranks with a 1-label one.
    r = s.post("/rerank", {"query": "q", "texts": ["one", "two", "three"], "return_text": True})
    assert r.status_code == 424 and r.json()["error_type"] == "Backend"


def test_default_model_embed_openai_and_curl(servers, bertrt_bin, default_model):
    import openai
    s = servers("default")
    want = [o["embedding"] for o in run_outputs(bertrt_bin, default_model, TEXTS)]
    got = s.post("/embed", {"inputs": TEXTS}).json()
    assert close(got, want)
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none")
    resp = client.embeddings.create(input=TEXTS, model="all-MiniLM-L6-v2")
    assert close([d.embedding for d in resp.data], want)
    assert resp.usage.prompt_tokens > 0
    curl = subprocess.run(["curl", "-s", "-X", "POST", s.url + "/embed", "-H", "Content-Type: application/json",
                           "-d", json.dumps({"inputs": TEXTS[0]})], capture_output=True, text=True, check=True)
    assert close(json.loads(curl.stdout), want[:1])
    info = requests.get(s.url + "/info").json()
    assert info["model_id"] == "all-MiniLM-L6-v2" and info["max_input_length"] > 0
    toks = s.post("/tokenize", {"inputs": "hello world"}).json()[0]
    assert toks[0]["special"] and toks[1]["text"] == "hello" and toks[1]["start"] == 0


def test_concurrent_clients_get_their_own_answers(servers, bertrt_bin):
    s = servers("seq_cls", "--max-queue-delay-us", "20000")
    texts = [f"request {i} " + "word " * (i % 9) for i in range(64)]
    want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), texts)]

    def one(i):
        r = s.post("/v2/models/seq_cls/infer", {"inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [1], "data": [texts[i]]}]})
        return r.json()["outputs"][0]["data"]

    with ThreadPoolExecutor(64) as pool:
        got = list(pool.map(one, range(64)))
    for g, w in zip(got, want):
        assert close(g, w)
    metrics = requests.get(s.url + "/metrics").text
    sizes = [line for line in metrics.splitlines() if line.startswith("bertrt_batch_size_bucket")]
    assert sizes and 'le="1"}' in sizes[0]
    first, total = int(sizes[0].split()[-1]), int(sizes[-1].split()[-1])
    assert first < total, "some batch should hold more than one request"


def ids_input(ids, datatype="INT64", shape=None):
    return {"inputs": [{"name": "input_ids", "datatype": datatype, "shape": shape or [1, len(ids)], "data": ids}]}


BAD = [
    ("/v2/models/seq_cls/infer", "{not json", 400),
    ("/v2/models/seq_cls/infer", ids_input([2, 5, 3], datatype="FP32"), 400),
    ("/v2/models/seq_cls/infer", ids_input([2, 5, 3], shape=[2, 2]), 400),
    ("/v2/models/seq_cls/infer", ids_input([2, 100000, 3]), 400),
    ("/v2/models/nope/infer", ids_input([2, 5, 3]), 404),
    ("/v2/models/seq_cls/versions/7/infer", ids_input([2, 5, 3]), 404),
    ("/v2/models/seq_cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [""]}]}, 400),
    ("/v2/models/seq_cls/infer", {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                                              "data": ["word " * 200]}]}, 413),
    # The TEI routes answer TEI's statuses: 422 for an invalid input, 424 for a route
    # the model's type does not serve.
    ("/predict", {"inputs": ""}, 422),
    ("/predict", {"inputs": "word " * 200}, 422),
    ("/predict", b'{"inputs": "\xff\xfe"}', 400),
    ("/embed", {"inputs": "hello"}, 424),  # a classification model has no embedding
    ("/predict", {"inputs": "x" * 2_000_000}, 413),
]


@pytest.mark.parametrize("path,body,status", BAD)
def test_bad_inputs_get_json_errors(servers, path, body, status):
    s = servers("seq_cls", "--max-payload-bytes", "1000000")
    data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()
    r = requests.post(s.url + path, data=data, headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code == status, r.text
    assert isinstance(r.json()["error"], str) and r.json()["error"]
    assert requests.get(s.url + "/v2/health/ready").status_code == 200


def test_truncate_makes_long_text_fit(servers):
    s = servers("seq_cls", "--max-payload-bytes", "1000000")
    assert s.post("/predict", {"inputs": "word " * 200, "truncate": True}).status_code == 200
    r = s.post("/predict", {"inputs": "word " * 200})
    assert r.status_code == 422 and "set truncate" in r.json()["error"]
    # OpenAI's route has no truncate field: its hint does not name one.
    e = servers("sentence_mean").post("/v1/embeddings", {"input": "word " * 200, "model": "m"})
    msg = e.json()["error"]["message"]
    assert e.status_code == 422 and "--auto-truncate" in msg and "truncate," not in msg, e.text


def test_token_ids_held_to_the_models_length(servers):
    """Token ids meet a text's rules (ServedModel::EncodeIds): more than max_seq_length (64
    here) is refused with 413 unless parameters.truncate, which keeps the first 64; a type
    id outside the model's is a 400."""
    s = servers("seq_cls")
    ids = [2] + [5 + i % 50 for i in range(98)] + [3]
    r = s.post("/v2/models/seq_cls/infer", ids_input(ids))
    assert r.status_code == 413 and "100 tokens, more than the model's 64" in r.json()["error"], r.text
    cut = s.post("/v2/models/seq_cls/infer", {**ids_input(ids), "parameters": {"truncate": True}})
    want = s.post("/v2/models/seq_cls/infer", ids_input(ids[:64]))
    assert cut.status_code == 200 and want.status_code == 200, cut.text
    assert np.allclose(cut.json()["outputs"][0]["data"], want.json()["outputs"][0]["data"], atol=1e-6)
    types = {"name": "token_type_ids", "datatype": "INT64", "shape": [1, 3], "data": [0, 7, 0]}
    bad = ids_input([2, 5, 3])
    bad["inputs"].append(types)
    r = s.post("/v2/models/seq_cls/infer", bad)
    assert r.status_code == 400 and "token type id 7" in r.json()["error"], r.text


def test_head_is_get_without_the_body(servers):
    """HEAD (health checks of load balancers): GET's status and headers, Content-Length
    included, no body; the kept-alive connection answers the next request."""
    s = servers("seq_cls")
    with requests.Session() as session:
        for path in ("/v2/health/ready", "/health", "/info", "/v2/models/seq_cls"):
            head = session.head(s.url + path, timeout=30)
            get = session.get(s.url + path, timeout=30)
            assert head.status_code == get.status_code == 200, path
            assert head.content == b"" and int(head.headers["Content-Length"]) == len(get.content), path
        assert session.head(s.url + "/nope", timeout=30).status_code == 404
        assert session.post(s.url + "/predict", json={"inputs": "hi"}, timeout=30).status_code == 200


def test_answer_larger_than_the_socket_takes_reaches_a_slow_reader(servers, bertrt_bin, default_model):
    """An answer is sent from the handler thread as far as the socket takes it, the rest
    by the I/O thread: a client that reads slowly, through a small receive window, still
    gets all of it, equal to `bertrt run`'s, and the next request pipelined behind it on
    the same connection."""
    s = servers("default")
    # ~4.8 MB of JSON: more than Linux's largest send buffer (tcp_wmem's 4 MB), so the
    # handler's send stops short and the I/O thread writes the rest.
    texts = [f"text number {i} " + "word " * (i % 7) for i in range(1024)]
    payload = json.dumps({"inputs": texts}).encode()
    request = (f"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload
    follow = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # before connect: the window
    c.connect(("127.0.0.1", s.port))
    c.settimeout(60)
    c.sendall(request + follow)
    time.sleep(1.5)  # the answer fills the socket meanwhile
    data = b""
    answers = []
    while len(answers) < 2:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].decode()
            length = int(next(line.split(":")[1] for line in head.split("\r\n")
                              if line.lower().startswith("content-length")))
            if len(data) >= head_end + 4 + length:
                answers.append((head, data[head_end + 4:head_end + 4 + length]))
                data = data[head_end + 4 + length:]
                continue
        chunk = c.recv(1024)
        assert chunk, f"closed after {len(answers)} answers"
        data += chunk
    c.close()
    assert answers[0][0].startswith("HTTP/1.1 200") and answers[1][0].startswith("HTTP/1.1 200")
    got = json.loads(answers[0][1])
    want = [o["embedding"] for o in run_outputs(bertrt_bin, default_model, texts[:5])]
    assert len(got) == len(texts) and close(got[:5], want)
    assert s.alive()


def test_auto_truncate_cuts_every_long_text(servers):
    s = servers("seq_cls", "--auto-truncate")
    long_text = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["word " * 200]}]}
    assert s.post("/v2/models/seq_cls/infer", long_text).status_code == 200
    assert s.post("/predict", {"inputs": "word " * 200}).status_code == 200
    # The same logits as the text cut by hand to the model's 64 tokens ([CLS] + 62 + [SEP]).
    cut = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["word " * 62]}]}
    a = s.post("/v2/models/seq_cls/infer", long_text).json()["outputs"][0]["data"]
    b = s.post("/v2/models/seq_cls/infer", cut).json()["outputs"][0]["data"]
    assert np.allclose(a, b, atol=1e-6)


def test_queue_full_is_429(servers):
    s = servers("seq_cls", "--max-queue-size", "1", "--max-batch-size", "1", "--max-queue-delay-us", "0")
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["word " * 60]}]}
    with ThreadPoolExecutor(64) as pool:
        codes = list(pool.map(lambda _: s.post("/v2/models/seq_cls/infer", body), range(256)))
    statuses = {r.status_code for r in codes}
    assert statuses <= {200, 429}
    assert 429 in statuses
    assert all("error" in r.json() for r in codes if r.status_code == 429)


def test_model_repository(bertrt_bin, tmp_path):
    for version in ("1", "3"):
        (tmp_path / "cls" / version).mkdir(parents=True)
        for f in (MODELS / "seq_cls").iterdir():
            (tmp_path / "cls" / version / f.name).symlink_to(f)
    (tmp_path / "qa" / "2").mkdir(parents=True)
    subprocess.run([bertrt_bin, "build", str(MODELS / "qa"), "-o", str(tmp_path / "qa/2/model.plan")],
                   capture_output=True, check=True)
    s = Server(bertrt_bin, ["--model-repository", str(tmp_path)])
    try:
        assert requests.get(s.url + "/v2/models/cls").json()["versions"] == ["3"]
        assert requests.get(s.url + "/v2/models/cls/versions/1").status_code == 404
        assert requests.get(s.url + "/v2/models/qa/versions/2/ready").status_code == 200
        r = s.post("/v2/models/qa/infer", ids_input([2, 5, 6, 3]))
        assert r.status_code == 200 and r.json()["outputs"][0]["shape"] == [1, 4]
    finally:
        s.stop()


KEY = "s3cret-key"


def test_api_key(bertrt_bin, default_model):
    import openai
    s = Server(bertrt_bin, [default_model, "--api-key", KEY])
    try:
        infer = ("/v2/models/all-MiniLM-L6-v2/infer",
                 {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]})
        calls = [infer, ("/embed", {"inputs": "hi"}),
                 ("/v1/embeddings", {"input": "hi", "model": "all-MiniLM-L6-v2"})]
        for path, body in calls:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY},
                            {"Authorization": "Bearer " + KEY + "x"}):
                r = requests.post(s.url + path, json=body, headers=headers, timeout=60)
                assert r.status_code == 401, (path, headers, r.text)
                # Each route's own error shape: OpenAI's object on /v1/embeddings.
                error = r.json()["error"]
                message = error["message"] if path == "/v1/embeddings" else error
                assert "Bearer API key is required" in message, r.text
                assert r.headers["WWW-Authenticate"] == "Bearer"
            r = requests.post(s.url + path, json=body, headers={"Authorization": "Bearer " + KEY}, timeout=60)
            assert r.status_code == 200, (path, r.text)
        assert requests.get(s.url + "/v2/models/all-MiniLM-L6-v2").status_code == 401
        for open_path in ("/v2/health/live", "/v2/health/ready", "/health"):
            assert requests.get(s.url + open_path).status_code == 200
        # /metrics names the models and their traffic: behind the key too.
        assert requests.get(s.url + "/metrics").status_code == 401
        client = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY)
        assert len(client.embeddings.create(input=["a", "b"], model="all-MiniLM-L6-v2").data) == 2
        bad = openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError, match="Bearer API key is required"):
            bad.embeddings.create(input="a", model="all-MiniLM-L6-v2")
        metrics = requests.get(s.url + "/metrics", headers={"Authorization": "Bearer " + KEY}).text
        assert 'bertrt_request_failure_total{model="",endpoint="kserve_infer",error="unauthorized"} 4' in metrics
        assert 'bertrt_request_failure_total{model="",endpoint="/v1/embeddings",error="unauthorized"} 5' in metrics
    finally:
        s.stop()
    log = s.proc.stderr.read()
    assert "API key auth on" in log and KEY not in log


def test_api_key_from_env(bertrt_bin, default_model, monkeypatch):
    monkeypatch.setenv("BERTRT_API_KEY", KEY)
    s = Server(bertrt_bin, [default_model])
    try:
        assert s.post("/embed", {"inputs": "hi"}).status_code == 401
        r = requests.post(s.url + "/embed", json={"inputs": "hi"},
                          headers={"Authorization": "Bearer " + KEY}, timeout=60)
        assert r.status_code == 200
    finally:
        s.stop()


def test_tritonclient_binary_data_defaults(servers, bertrt_bin):
    """tritonclient.http's defaults: binary inputs, and binary outputs (requested
    per output, or all of them through binary_data_output)."""
    import tritonclient.http as triton
    s = servers("token_cls")
    c = triton.InferenceServerClient(f"127.0.0.1:{s.port}")
    text = triton.InferInput("text", [len(TEXTS)], "BYTES")
    text.set_data_from_numpy(np.array([t.encode() for t in TEXTS], dtype=np.object_))
    want = run_outputs(bertrt_bin, str(MODELS / "token_cls"), TEXTS)
    for outputs in (None, [triton.InferRequestedOutput("logits", binary_data=True)]):
        result = c.infer("token_cls", [text], outputs=outputs)
        assert result.get_output("logits")["parameters"]["binary_data_size"] > 0
        logits = result.as_numpy("logits")
        for i, w in enumerate(want):
            assert close(logits[i, :len(w["logits"])], w["logits"])
    # Binary ids, JSON outputs: the response is plain JSON.
    _, toks, _ = run_jsonl(bertrt_bin, ["tokenize", str(MODELS / "token_cls")], [{"text": TEXTS[0]}])
    for dtype, name in ((np.int32, "INT32"), (np.int64, "INT64")):
        ids = triton.InferInput("input_ids", [1, len(toks[0]["input_ids"])], name)
        ids.set_data_from_numpy(np.array([toks[0]["input_ids"]], dtype=dtype))
        result = c.infer("token_cls", [ids], outputs=[triton.InferRequestedOutput("logits", binary_data=False)])
        assert "data" in result.get_output("logits")
        assert close(result.as_numpy("logits")[0], want[0]["logits"])


def binary_body(header, raw):
    head = json.dumps(header).encode()
    return head + raw, {"Inference-Header-Content-Length": str(len(head)),
                        "Content-Type": "application/octet-stream"}


def test_binary_response_layout(servers, bertrt_bin):
    s = servers("seq_cls")
    raw = b"".join(len(t.encode()).to_bytes(4, "little") + t.encode() for t in TEXTS)
    body, headers = binary_body({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(TEXTS)],
                                             "parameters": {"binary_data_size": len(raw)}}],
                                 "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}, raw)
    r = requests.post(s.url + "/v2/models/seq_cls/infer", data=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/octet-stream"
    n = int(r.headers["Inference-Header-Content-Length"])
    head = json.loads(r.content[:n])
    out = head["outputs"][0]
    assert "data" not in out and out["parameters"]["binary_data_size"] == len(TEXTS) * 3 * 4
    assert len(r.content) == n + len(TEXTS) * 3 * 4
    want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), TEXTS)]
    assert close(np.frombuffer(r.content[n:], dtype="<f4").reshape(len(TEXTS), 3), want)


def ids_header(size, datatype="INT64", shape=(1, 3)):
    return {"inputs": [{"name": "input_ids", "datatype": datatype, "shape": list(shape),
                        "parameters": {"binary_data_size": size}}]}


IDS = np.array([2, 5, 3], dtype="<i8").tobytes()
BAD_BINARY = [
    ("size past the end", *binary_body(ids_header(100), IDS)),
    ("bytes left over", *binary_body(ids_header(24), IDS + bytes(8))),
    ("size not the shape's", *binary_body(ids_header(24, shape=(1, 2)), IDS)),
    ("int32 size of int64 data", *binary_body(ids_header(24, datatype="INT32"), IDS)),
    ("header length past the body", binary_body(ids_header(24), IDS)[0],
     {"Inference-Header-Content-Length": "100000"}),
    ("header length not a number", binary_body(ids_header(24), IDS)[0], {"Inference-Header-Content-Length": "-5"}),
    ("header length cuts the JSON", binary_body(ids_header(24), IDS)[0], {"Inference-Header-Content-Length": "10"}),
    ("BYTES element past the end", *binary_body(
        {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 7}}]},
        (99).to_bytes(4, "little") + b"abc")),
]


@pytest.mark.parametrize("what,body,headers", BAD_BINARY, ids=[b[0] for b in BAD_BINARY])
def test_malformed_binary_body_is_400(servers, what, body, headers):
    s = servers("seq_cls", "--max-payload-bytes", "1000000")
    r = requests.post(s.url + "/v2/models/seq_cls/infer", data=body, headers=headers, timeout=60)
    assert r.status_code == 400, r.text
    assert isinstance(r.json()["error"], str) and r.json()["error"]
    assert requests.get(s.url + "/v2/health/ready").status_code == 200
    # The same ids, well formed, work.
    body, headers = binary_body(ids_header(24), IDS)
    assert requests.post(s.url + "/v2/models/seq_cls/infer", data=body, headers=headers).status_code == 200


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"  # the W3C spec's example


def test_request_ids_and_access_log(bertrt_bin):
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--log-requests"])
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]}
    try:
        # A W3C trace context joins the log line to the client's trace; a malformed one is ignored.
        r = requests.post(s.url + "/v2/models/seq_cls/infer", json=body,
                          headers={"X-Request-Id": "client-id-7", "traceparent": TRACEPARENT}, timeout=30)
        assert r.status_code == 200 and r.headers["X-Request-Id"] == "client-id-7"
        r = requests.post(s.url + "/v2/models/seq_cls/infer", json=body, timeout=30, headers={
            "X-Request-Id": "bad-trace", "traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"})
        assert r.status_code == 200
        r = requests.post(s.url + "/v2/models/nope/infer", json=body, timeout=30)
        generated = r.headers["X-Request-Id"]
        assert r.status_code == 404 and len(generated) == 16
    finally:
        s.stop()
    lines = [json.loads(l) for l in s.proc.stderr.read().splitlines() if l.startswith("{")]
    by_id = {l["request_id"]: l for l in lines}
    assert by_id["client-id-7"]["status"] == 200 and by_id["client-id-7"]["method"] == "POST"
    assert by_id["client-id-7"]["path"] == "/v2/models/seq_cls/infer"
    assert by_id["client-id-7"]["latency_ms"] >= 0 and by_id["client-id-7"]["ts"].endswith("Z")
    assert by_id[generated]["status"] == 404
    assert by_id["client-id-7"]["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert by_id["client-id-7"]["parent_id"] == "00f067aa0ba902b7"
    assert "trace_id" not in by_id["bad-trace"] and "trace_id" not in by_id[generated]


def hold_connections(url, n):
    """n sessions, each keeping one connection open and idle (keep-alive)."""
    held = [requests.Session() for _ in range(n)]
    for h in held:
        assert h.get(url + "/v2/health/live", timeout=5).status_code == 200
    return held


def test_idle_connections_do_not_block_new_clients(bertrt_bin):
    """An open connection holds no handler thread (httplib's held one for its
    life, idle keep-alive waits included, and a new client waited up to 5 s for
    one): with more idle connections than ready threads, a new client is
    answered at once."""
    # Idle connections close only after 300 s: a new client that waited for one of
    # them to go would time out (30 s) instead of being answered.
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--http-thread-count", "2",
                            "--http-header-timeout", "300"], grpc=False)
    held = hold_connections(s.url, 4)  # two more than the ready threads
    try:
        assert requests.get(s.url + "/v2/health/live", timeout=30).status_code == 200
    finally:
        for h in held:
            h.close()
        s.stop()


def test_http_max_threads_bounds_requests_in_flight(bertrt_bin):
    """--http-max-threads caps the requests handled at once: with one, a request
    that waits in the batcher (here 2 s for company) holds it, and a second
    request is answered after the first, while idle connections hold nothing."""
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--http-thread-count", "1",
                            "--http-max-threads", "1", "--max-queue-delay-us", "2000000"],
               grpc=False)
    held = hold_connections(s.url, 3)
    try:
        with ThreadPoolExecutor(1) as pool:
            t0 = time.monotonic()
            first = pool.submit(requests.post, s.url + "/predict", json={"inputs": "hi"},
                                timeout=30)
            time.sleep(0.5)
            assert requests.get(s.url + "/v2/health/live", timeout=30).status_code == 200
            assert time.monotonic() - t0 > 1.5  # behind the first request's 2 s
            assert first.result(timeout=20).status_code == 200
    finally:
        for h in held:
            h.close()
        s.stop()


def test_http_max_threads_below_ready_threads_fails_at_start(bertrt_bin):
    """Fewer threads allowed than kept ready is a contradiction: a usage error
    (exit 2) that names both flags, not a silently raised limit."""
    proc = subprocess.run([bertrt_bin, "serve", str(MODELS / "seq_cls"), "--http-thread-count",
                           "8", "--http-max-threads", "4", "--http-port", str(free_port()),
                           "--grpc-port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--http-max-threads 4 is below --http-thread-count 8" in proc.stderr, proc.stderr


@pytest.mark.parametrize("how, flags", [("reset", []), ("close", ["--http-cancel-on-close"])])
def test_client_that_disconnects_costs_no_compute(bertrt_bin, how, flags):
    """Each request waits a second for company in the batcher; its client
    resets the connection after 0.2 s (or, with --http-cancel-on-close, closes
    it), so the scheduler drops the request instead of computing it (gRPC's
    cancel does the same); the server stays up and a patient client still gets
    its answer. A plain close is a half-close to the server, which by default
    still answers (test_hostile)."""
    import socket
    import struct
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--max-queue-delay-us", "1000000", *flags],
               grpc=False)
    infer = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]}
    try:
        batches = s.metric('bertrt_batch_size_count{model="seq_cls"}')  # the warm-up run
        for path, body in [("/v2/models/seq_cls/infer", infer), ("/predict", {"inputs": "hi"})]:
            c = s.raw_post(path, body)
            time.sleep(0.2)
            if how == "reset":  # linger 0: close sends RST
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
        time.sleep(1.5)
        assert s.metric('bertrt_batch_size_count{model="seq_cls"}') == batches
        assert s.metric('bertrt_request_failure_total{model="seq_cls",endpoint="kserve_infer",error="unavailable"}') == 1
        assert s.metric('bertrt_request_failure_total{model="seq_cls",endpoint="/predict",error="unavailable"}') == 1
        assert s.post("/v2/models/seq_cls/infer", infer).status_code == 200
        assert s.metric('bertrt_batch_size_count{model="seq_cls"}') == batches + 1
    finally:
        s.stop()


def test_slow_and_vanishing_clients_do_not_hold_up_others(bertrt_bin):
    """A client that sends half a request and stalls, and one that vanishes
    mid-body, cost a handler thread each until they time out or go; others are
    answered meanwhile, and the server stays up."""
    # The stalled client would hold the server for 300 s: others, answered within
    # their 60 s timeout, did not wait for it.
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--http-header-timeout", "300",
                            "--http-body-timeout", "300"], grpc=False)
    infer = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]}
    try:
        stalled = s.raw_post("/v2/models/seq_cls/infer", infer, send_bytes=90)
        s.raw_post("/v2/models/seq_cls/infer", infer, send_bytes=120).close()
        assert s.post("/v2/models/seq_cls/infer", infer).status_code == 200
        stalled.close()
        assert s.alive()
    finally:
        s.stop()


def test_every_exported_metric_is_in_the_readme(servers):
    """Each metric family /metrics types is named in README's metrics table (a row's name,
    or a `prefix_*` row), so that an operator reading the table finds every one."""
    import re
    from conftest import ROOT
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("### Metrics"):readme.index("### Tokenizers")]
    names = set(re.findall(r"`([a-z_]+)(?:\{[^}]*\})?`", table))
    prefixes = re.findall(r"`([a-z_]+)\*`", table)
    s = servers("seq_cls")
    assert s.post("/v2/models/seq_cls/infer", {"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a"]}]}).status_code == 200
    exported = re.findall(r"^# TYPE (\S+) ", requests.get(s.url + "/metrics").text, re.M)
    assert len(exported) > 30, exported
    missing = [n for n in exported if n not in names and not any(n.startswith(p) for p in prefixes)]
    assert not missing, f"exported but not in README's metrics table: {missing}"


def test_metrics_read_by_the_prometheus_client_parser(servers):
    """/metrics as Prometheus scrapes it, read by the official client's parser:
    every family typed, each histogram whole (cumulative buckets up to +Inf,
    which equals its count, and a sum), and the counters following the traffic."""
    from prometheus_client.parser import text_string_to_metric_families
    s = servers("seq_cls")
    for text in ("a", "b b", "c c c"):
        r = s.post("/v2/models/seq_cls/infer", {"inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [1], "data": [text]}]})
        assert r.status_code == 200, r.text
    assert s.post("/v2/models/seq_cls/infer", {"inputs": []}).status_code == 400

    families = {f.name: f for f in text_string_to_metric_families(requests.get(s.url + "/metrics").text)}

    def family(name, kind):
        # The parser names a counter's family without its _total suffix.
        f = families.get(name) or families.get(name.removesuffix("_total"))
        assert f is not None, f"{name} missing from /metrics: {sorted(families)}"
        assert f.type == kind, (name, f.type)
        return f

    def value(f, sample_name, **labels):
        return sum(smp.value for smp in f.samples
                   if smp.name == sample_name and all(smp.labels.get(k) == v for k, v in labels.items()))

    ok = family("bertrt_request_success_total", "counter")
    assert value(ok, "bertrt_request_success_total", model="seq_cls", endpoint="kserve_infer") >= 3
    failed = family("bertrt_request_failure_total", "counter")
    assert value(failed, "bertrt_request_failure_total", endpoint="kserve_infer", error="validation") >= 1
    family("bertrt_inflight_requests", "gauge")
    # TEI's input lengths: one observation per input that reached the batcher.
    lengths = family("te_request_input_length", "histogram")
    assert value(lengths, "te_request_input_length_count", model="seq_cls") >= 3
    family("bertrt_instance_batches_total", "counter")
    # TEI's names for the same traffic: its counters (written without _total, which the
    # parser adds to the samples) and failures by class.
    assert value(family("te_request_count", "counter"), "te_request_count_total") >= 4
    assert value(family("te_request_success", "counter"), "te_request_success_total") >= 3
    assert value(family("te_request_failure", "counter"), "te_request_failure_total", err="validation") >= 1
    # The stages of the successful requests: as many of each, and they add up to no more
    # than the requests' whole time.
    stages = family("bertrt_request_stage_seconds", "histogram")
    counts = {st: value(stages, "bertrt_request_stage_seconds_count", model="seq_cls", stage=st)
              for st in ("parse", "tokenize", "queue", "compute", "respond")}
    assert len(set(counts.values())) == 1 and counts["parse"] >= 3, counts
    staged = sum(value(stages, "bertrt_request_stage_seconds_sum", model="seq_cls", stage=st) for st in counts)
    whole = family("bertrt_request_duration_seconds", "histogram")
    assert 0 < staged <= value(whole, "bertrt_request_duration_seconds_sum", model="seq_cls")
    # The batcher's queue and compute histograms count the same requests (each that ran).
    for name in ("bertrt_queue_duration_seconds", "bertrt_compute_duration_seconds"):
        ran = value(family(name, "histogram"), name + "_count", model="seq_cls")
        assert ran == counts["queue"], (name, ran, counts)
    for name in ("bertrt_request_duration_seconds", "bertrt_queue_duration_seconds",
                 "bertrt_compute_duration_seconds", "bertrt_batch_size", "bertrt_batch_tokens",
                 "te_request_duration", "te_request_tokenization_duration", "te_request_queue_duration",
                 "te_request_inference_duration", "te_batch_next_size", "te_batch_next_tokens"):
        f = family(name, "histogram")
        buckets = [(float(smp.labels["le"]), smp.value) for smp in f.samples
                   if smp.name == name + "_bucket" and smp.labels.get("model") == "seq_cls"]
        assert buckets and buckets[-1][0] == float("inf"), (name, buckets)
        bounds, counts = zip(*buckets)
        assert list(bounds) == sorted(bounds) and list(counts) == sorted(counts), (name, buckets)
        count = value(f, name + "_count", model="seq_cls")
        assert counts[-1] == count >= 1, (name, counts[-1], count)
        assert any(smp.name == name + "_sum" for smp in f.samples), name

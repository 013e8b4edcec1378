"""KServe v2 over gRPC end to end: the real `bertrt serve`, driven by
tritonclient.grpc and by raw grpcio stubs (for requests tritonclient would not
send); answers equal `bertrt run` and the HTTP endpoint."""
import json
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
import requests
import tritonclient.grpc as tg
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc
from tritonclient.utils import InferenceServerException

from conftest import run_jsonl, wait_until_ready
from server_util import MODELS, TEXTS, Server, close, free_port, run_outputs, servers  # noqa: F401

LIMIT = ("--max-payload-bytes", "1000000")


def client(s):
    return tg.InferenceServerClient(s.grpc_url)


def stub(s):
    return pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(s.grpc_url))


def text_input(texts, name="text", shape=None):
    arr = np.array([t.encode() if isinstance(t, str) else t for t in texts], dtype=np.object_)
    if shape:
        arr = arr.reshape(shape)
    i = tg.InferInput(name, list(arr.shape), "BYTES")
    i.set_data_from_numpy(arr)
    return i


def padded_ids(bertrt_bin, model, texts):
    _, toks, _ = run_jsonl(bertrt_bin, ["tokenize", str(MODELS / model)], [{"text": t} for t in texts])
    ids = [t["input_ids"] for t in toks]
    seq = max(map(len, ids))
    padded = np.array([i + [0] * (seq - len(i)) for i in ids], dtype=np.int64)
    mask = np.array([[1] * len(i) + [0] * (seq - len(i)) for i in ids], dtype=np.int64)
    return ids, padded, mask


def test_health_and_metadata(servers):
    s = servers("seq_cls")
    c = client(s)
    assert c.is_server_live() and c.is_server_ready()
    assert c.is_model_ready("seq_cls") and c.is_model_ready("seq_cls", "1")
    assert not c.is_model_ready("nope") and not c.is_model_ready("seq_cls", "7")
    meta = c.get_server_metadata(as_json=True)
    assert meta["name"] == "bertrt" and "binary_tensor_data" in meta["extensions"]
    m = c.get_model_metadata("seq_cls", as_json=True)
    assert m["name"] == "seq_cls" and m["versions"] == ["1"] and m["platform"] == "bertrt_cpu"
    assert {"name": "logits", "datatype": "FP32", "shape": ["-1", "3"]} in m["outputs"]
    assert {i["name"] for i in m["inputs"]} == {"text", "text_pair", "input_ids", "attention_mask",
                                                 "token_type_ids"}
    # The same description as HTTP's, derived from the model.
    http = requests.get(s.url + "/v2/models/seq_cls").json()
    assert [(o["name"], o["shape"]) for o in http["outputs"]] == \
        [(o["name"], [int(d) for d in o["shape"]]) for o in m["outputs"]]
    t = client(servers("token_cls")).get_model_metadata("token_cls", as_json=True)
    assert {"name": "logits", "datatype": "FP32", "shape": ["-1", "-1", "9"]} in t["outputs"]


def test_text_logits_equal_run_and_http(servers, bertrt_bin):
    s = servers("seq_cls")
    result = client(s).infer("seq_cls", [text_input(TEXTS, shape=[len(TEXTS), 1])], request_id="r1")
    logits = result.as_numpy("logits")
    assert logits.shape == (len(TEXTS), 3) and result.get_response().id == "r1"
    want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), TEXTS)]
    assert close(logits, want)
    http = s.post("/v2/models/seq_cls/infer", {"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [len(TEXTS)], "data": TEXTS}]}).json()
    assert close(logits, np.reshape(http["outputs"][0]["data"], (len(TEXTS), 3)), tol=1e-6)


def test_text_pair_and_requested_outputs(servers, bertrt_bin):
    s = servers("qa")
    outputs = [tg.InferRequestedOutput("end_logits")]
    r = client(s).infer("qa", [text_input(["who is it"]), text_input(["it is me"], "text_pair")],
                        outputs=outputs)
    assert r.as_numpy("start_logits") is None
    _, want, _ = run_jsonl(bertrt_bin, ["run", str(MODELS / "qa")], [{"text": "who is it", "text_pair": "it is me"}])
    assert close(r.as_numpy("end_logits"), [want[0]["end_logits"]])


@pytest.mark.parametrize("dtype,triton", [(np.int64, "INT64"), (np.int32, "INT32")])
def test_token_ids_with_attention_mask(servers, bertrt_bin, dtype, triton):
    s = servers("token_cls")
    ids, padded, mask = padded_ids(bertrt_bin, "token_cls", TEXTS)
    inputs = [tg.InferInput("input_ids", list(padded.shape), triton),
              tg.InferInput("attention_mask", list(mask.shape), triton)]
    inputs[0].set_data_from_numpy(padded.astype(dtype))
    inputs[1].set_data_from_numpy(mask.astype(dtype))
    logits = client(s).infer("token_cls", inputs).as_numpy("logits")
    assert logits.shape == (len(TEXTS), padded.shape[1], 9)
    want = run_outputs(bertrt_bin, str(MODELS / "token_cls"), TEXTS)
    for i, w in enumerate(want):
        assert close(logits[i, :len(ids[i])], w["logits"])
        assert not logits[i, len(ids[i]):].any()


def test_typed_contents(servers, bertrt_bin):
    """bytes_contents / int_contents / int64_contents instead of raw_input_contents."""
    s = servers("seq_cls")
    want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), TEXTS)]
    ids, padded, _ = padded_ids(bertrt_bin, "seq_cls", TEXTS[:1])
    cases = [
        pb.ModelInferRequest.InferInputTensor(name="text", datatype="BYTES", shape=[len(TEXTS)],
                                              contents=pb.InferTensorContents(bytes_contents=[t.encode() for t in TEXTS])),
        pb.ModelInferRequest.InferInputTensor(name="input_ids", datatype="INT32", shape=list(padded.shape),
                                              contents=pb.InferTensorContents(int_contents=ids[0])),
        pb.ModelInferRequest.InferInputTensor(name="input_ids", datatype="INT64", shape=list(padded.shape),
                                              contents=pb.InferTensorContents(int64_contents=ids[0])),
    ]
    for tensor in cases:
        resp = stub(s).ModelInfer(pb.ModelInferRequest(model_name="seq_cls", inputs=[tensor]))
        n = tensor.shape[0]
        assert resp.outputs[0].name == "logits" and list(resp.outputs[0].shape) == [n, 3]
        got = np.frombuffer(resp.raw_output_contents[0], dtype="<f4").reshape(n, 3)
        assert close(got, want[:n])


def test_default_model_embeddings_equal_http(servers, default_model, bertrt_bin):
    s = servers("default")
    emb = client(s).infer("all-MiniLM-L6-v2", [text_input(TEXTS)]).as_numpy("embedding")
    want = [o["embedding"] for o in run_outputs(bertrt_bin, default_model, TEXTS)]
    assert close(emb, want)
    assert close(emb, s.post("/embed", {"inputs": TEXTS}).json(), tol=1e-6)


def test_stream_infer_answers_each_request(servers, bertrt_bin):
    s = servers("seq_cls")
    want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), TEXTS)]
    got, done = {}, threading.Event()

    def callback(result, error):
        key = error if error is not None else result.get_response().id
        got[str(key) if error is not None else key] = (result, error)
        if len(got) == len(TEXTS) + 1:
            done.set()

    c = client(s)
    c.start_stream(callback=callback)
    for i, t in enumerate(TEXTS):
        c.async_stream_infer("seq_cls", [text_input([t])], request_id=str(i))
        if i == 1:  # a failing request in the middle: answered with an error, the stream goes on
            c.async_stream_infer("seq_cls", [text_input([""])], request_id="bad")
    assert done.wait(60), got
    c.stop_stream()
    errors = [e for r, e in got.values() if e is not None]
    assert len(errors) == 1 and "empty text" in str(errors[0])
    for i in range(len(TEXTS)):
        result, error = got[str(i)]
        assert error is None and close(result.as_numpy("logits"), [want[i]])


@pytest.fixture(scope="module")
def repository_server(bertrt_bin, tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    for model in ("seq_cls", "qa"):
        (repo / model / "1").mkdir(parents=True)
        for f in (MODELS / model).iterdir():
            (repo / model / "1" / f.name).symlink_to(f)
    s = Server(bertrt_bin, ["--model-repository", str(repo), "--model-control-mode", "explicit",
                            "--load-model", "seq_cls", "--load-model", "qa"])
    yield s
    s.stop()


def test_repository_index_and_load(repository_server):
    c = client(repository_server)
    index = c.get_model_repository_index(as_json=True)["models"]
    assert sorted((m["name"], m["version"], m["state"]) for m in index) == \
        [("qa", "1", "READY"), ("seq_cls", "1", "READY")]
    c.load_model("seq_cls")  # already served: loaded again (or kept), no error
    assert c.is_model_ready("seq_cls")
    with pytest.raises(InferenceServerException) as e:
        c.load_model("nope")
    assert e.value.status() == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as e:
        c.unload_model("nope")
    assert e.value.status() == "StatusCode.NOT_FOUND"


def test_repository_unload_then_load(repository_server):
    c = client(repository_server)
    c.unload_model("qa")
    assert not c.is_model_ready("qa")
    states = {m["name"]: m["state"] for m in c.get_model_repository_index(as_json=True)["models"]}
    assert states == {"qa": "UNAVAILABLE", "seq_cls": "READY"}
    with pytest.raises(InferenceServerException) as e:
        c.infer("qa", [text_input(["who"]), text_input(["me"], "text_pair")])
    assert e.value.status() in ("StatusCode.NOT_FOUND", "StatusCode.UNAVAILABLE")
    c.load_model("qa")
    assert c.is_model_ready("qa")
    assert c.infer("qa", [text_input(["who"]), text_input(["me"], "text_pair")]).as_numpy("start_logits") is not None


def test_concurrent_clients_get_their_own_answers(servers, bertrt_bin):
    s = servers("seq_cls", "--max-queue-delay-us", "20000")
    texts = [f"request {i} " + "word " * (i % 9) for i in range(64)]
    want = [o["logits"] for o in run_outputs(bertrt_bin, str(MODELS / "seq_cls"), texts)]

    def one(i):
        return client(s).infer("seq_cls", [text_input([texts[i]])], request_id=str(i))

    with ThreadPoolExecutor(64) as pool:
        results = list(pool.map(one, range(64)))
    for i, (r, w) in enumerate(zip(results, want)):
        assert r.get_response().id == str(i) and close(r.as_numpy("logits"), [w])
    metrics = requests.get(s.url + "/metrics").text
    assert 'bertrt_request_success_total{model="seq_cls",endpoint="grpc_infer"} 64' in metrics


def tensor(name, datatype, shape, raw):
    return pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=shape), raw


def ids_raw(ids, fmt="<q"):
    return b"".join(struct.pack(fmt, i) for i in ids)


def text_raw(*texts):
    return b"".join(struct.pack("<I", len(t)) + t for t in texts)


BAD = [
    ("unknown model", "nope", "", [tensor("input_ids", "INT64", [1, 3], ids_raw([2, 5, 3]))], "NOT_FOUND"),
    ("unknown version", "seq_cls", "7", [tensor("input_ids", "INT64", [1, 3], ids_raw([2, 5, 3]))], "NOT_FOUND"),
    ("wrong datatype", "seq_cls", "", [tensor("input_ids", "FP32", [1, 3], ids_raw([2, 5, 3], "<f"))],
     "INVALID_ARGUMENT"),
    ("wrong shape", "seq_cls", "", [tensor("input_ids", "INT64", [3], ids_raw([2, 5, 3]))], "INVALID_ARGUMENT"),
    ("shape vs data", "seq_cls", "", [tensor("input_ids", "INT64", [2, 2], ids_raw([2, 5, 3]))],
     "INVALID_ARGUMENT"),
    ("mask shape", "seq_cls", "", [tensor("input_ids", "INT64", [1, 3], ids_raw([2, 5, 3])),
                                   tensor("attention_mask", "INT64", [1, 2], ids_raw([1, 1]))], "INVALID_ARGUMENT"),
    ("id out of vocab", "seq_cls", "", [tensor("input_ids", "INT64", [1, 3], ids_raw([2, 100000, 3]))],
     "INVALID_ARGUMENT"),
    ("id beyond int32", "seq_cls", "", [tensor("input_ids", "INT64", [1, 3], ids_raw([2, 1 << 40, 3]))],
     "INVALID_ARGUMENT"),
    ("empty text", "seq_cls", "", [tensor("text", "BYTES", [1], text_raw(b""))], "INVALID_ARGUMENT"),
    ("over-long text", "seq_cls", "", [tensor("text", "BYTES", [1], text_raw(b"word " * 200))], "OUT_OF_RANGE"),
    ("invalid UTF-8", "seq_cls", "", [tensor("text", "BYTES", [1], text_raw(b"ab\xff\xfe"))], "INVALID_ARGUMENT"),
    ("BYTES length past end", "seq_cls", "", [tensor("text", "BYTES", [1], struct.pack("<I", 50) + b"abc")],
     "INVALID_ARGUMENT"),
    ("negative dimension", "seq_cls", "", [tensor("input_ids", "INT64", [1, -3], ids_raw([2, 5, 3]))],
     "INVALID_ARGUMENT"),
    ("no inputs", "seq_cls", "", [], "INVALID_ARGUMENT"),
    ("unknown output", "seq_cls", "", [tensor("text", "BYTES", [1], text_raw(b"hi"))], "INVALID_ARGUMENT"),
    ("oversize message", "seq_cls", "", [tensor("text", "BYTES", [1], text_raw(b"x" * 2_000_000))],
     "RESOURCE_EXHAUSTED"),
]


@pytest.mark.parametrize("what,model,version,inputs,code", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs_get_status_codes(servers, what, model, version, inputs, code):
    s = servers("seq_cls", *LIMIT)
    req = pb.ModelInferRequest(model_name=model, model_version=version,
                               inputs=[t for t, _ in inputs], raw_input_contents=[r for _, r in inputs])
    if what == "unknown output":
        req.outputs.add(name="hidden")
    with pytest.raises(grpc.RpcError) as e:
        stub(s).ModelInfer(req, timeout=60)
    assert e.value.code().name == code, e.value.details()
    assert e.value.details()
    assert s.alive() and client(s).is_server_ready()


def test_bad_raw_contents_count_and_mixed_data(servers):
    s = servers("seq_cls", *LIMIT)
    t = pb.ModelInferRequest.InferInputTensor(name="input_ids", datatype="INT64", shape=[1, 3],
                                              contents=pb.InferTensorContents(int64_contents=[2, 5, 3]))
    for raw in ([], [ids_raw([2, 5, 3])] * 2, [ids_raw([2, 5, 3])]):
        req = pb.ModelInferRequest(model_name="seq_cls", inputs=[t], raw_input_contents=raw)
        if not raw:  # typed data in the wrong field for the datatype
            req.inputs[0].datatype = "INT32"
        with pytest.raises(grpc.RpcError) as e:
            stub(s).ModelInfer(req, timeout=60)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert s.alive()


def test_truncate_parameter(servers):
    s = servers("seq_cls", *LIMIT)
    r = client(s).infer("seq_cls", [text_input(["word " * 200])], parameters={"truncate": True})
    assert r.as_numpy("logits").shape == (1, 3)


KEY = "s3cret-key"


def test_api_key(bertrt_bin):
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--api-key", KEY])
    try:
        c = client(s)
        assert c.is_server_live() and c.is_server_ready()  # health stays open
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEY}):
            with pytest.raises(InferenceServerException) as e:
                c.infer("seq_cls", [text_input(["hi"])], headers=headers)
            assert e.value.status() == "StatusCode.UNAUTHENTICATED"
            assert "Bearer API key is required" in e.value.message()
            with pytest.raises(InferenceServerException):
                c.get_model_metadata("seq_cls", headers=headers)
        ok = c.infer("seq_cls", [text_input(["hi"])], headers={"authorization": "Bearer " + KEY})
        assert ok.as_numpy("logits").shape == (1, 3)
        metrics = requests.get(s.url + "/metrics", headers={"Authorization": "Bearer " + KEY}).text
        assert 'bertrt_request_failure_total{model="",endpoint="grpc_infer",error="unauthorized"} 3' in metrics
    finally:
        s.stop()


def test_grpc_port_in_use_is_a_clear_error(bertrt_bin):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([bertrt_bin, "serve", str(MODELS / "seq_cls"), "--threads", "1",
                               "--http-port", str(free_port()), "--grpc-port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 6, proc.stderr  # kExitUnavailable: a port to listen on
    assert f"cannot listen for gRPC on 127.0.0.1:{port}" in proc.stderr


def test_sigint_finishes_in_flight_requests(bertrt_bin):
    # Requests wait in the batcher (long queue delay) when the signal comes.
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--max-queue-delay-us", "2000000"])
    try:
        c = client(s)
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(c.infer, "seq_cls", [text_input([f"text {i}"])]) for i in range(8)]
            time.sleep(0.5)
            s.proc.send_signal(signal.SIGINT)
            results = [f.result() for f in futures]
        assert all(r.as_numpy("logits").shape == (1, 3) for r in results)
        assert s.proc.wait(timeout=30) == 0
    finally:
        if s.proc.poll() is None:
            s.stop()
    log = s.proc.stderr.read()
    assert f"grpc 127.0.0.1:{s.grpc_port}" in log and "[serve] stopped" in log


def test_grpc_port_zero_turns_grpc_off(bertrt_bin):
    s = Server(bertrt_bin, [str(MODELS / "seq_cls")], grpc=False)
    s.stop()
    assert "grpc off" in s.proc.stderr.read()


def test_cancelled_client_costs_no_compute(bertrt_bin):
    # The request waits a second for company in the batcher; the client gives
    # up after 0.2 s, so the scheduler must drop it instead of computing it.
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--max-queue-delay-us", "1000000"])
    try:
        batches = s.metric('bertrt_batch_size_count{model="seq_cls"}')  # the warm-up run
        req = pb.ModelInferRequest(model_name="seq_cls", inputs=[
            pb.ModelInferRequest.InferInputTensor(name="text", datatype="BYTES", shape=[1],
                                                  contents=pb.InferTensorContents(bytes_contents=[b"hi"]))])
        with pytest.raises(grpc.RpcError) as e:
            stub(s).ModelInfer(req, timeout=0.2)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        time.sleep(1.5)
        assert s.metric('bertrt_batch_size_count{model="seq_cls"}') == batches
        assert s.metric('bertrt_request_failure_total{model="seq_cls",endpoint="grpc_infer",error="unavailable"}') == 1
        # A patient client still gets its answer.
        assert stub(s).ModelInfer(req, timeout=30).outputs[0].name == "logits"
        assert s.metric('bertrt_batch_size_count{model="seq_cls"}') == batches + 1
    finally:
        s.stop()


def test_access_log_has_grpc_requests(bertrt_bin):
    s = Server(bertrt_bin, [str(MODELS / "seq_cls"), "--log-requests"])
    try:
        c = client(s)
        c.infer("seq_cls", [text_input(["hi"])], headers={
            "x-request-id": "grpc-id-1", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
        with pytest.raises(InferenceServerException):
            c.infer("nope", [text_input(["hi"])])
    finally:
        s.stop()
    lines = [json.loads(l) for l in s.proc.stderr.read().splitlines() if l.startswith("{")]
    grpc_lines = [l for l in lines if l["protocol"] == "grpc"]
    ok = next(l for l in grpc_lines if l["request_id"] == "grpc-id-1")
    assert ok["status"] == "OK" and ok["model"] == "seq_cls" and ok["method"] == "grpc_infer"
    assert ok["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" and ok["parent_id"] == "00f067aa0ba902b7"
    failed = [l for l in grpc_lines if l["model"] == "nope"]
    assert failed and failed[0]["status"] == "NotFound" and len(failed[0]["request_id"]) == 16


def test_idle_connections_do_not_block_new_clients(bertrt_bin):
    """A connection holds no thread (a call holds one only while it is computed):
    300 connections kept open and idle (more than the 256 handler threads) leave a
    new client answered, not waiting for one of them to go."""
    s = Server(bertrt_bin, [str(MODELS / "seq_cls")])
    # A local subchannel pool: each channel its own TCP connection.
    options = [("grpc.use_local_subchannel_pool", 1)]
    held = []
    try:
        for _ in range(300):
            channel = grpc.insecure_channel(s.grpc_url, options=options)
            held.append(channel)
            pb_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(), timeout=10)
        # Blocked, it would wait for an idle connection to go, which none does.
        with grpc.insecure_channel(s.grpc_url, options=options) as channel:
            live = pb_grpc.GRPCInferenceServiceStub(channel).ServerLive(pb.ServerLiveRequest(),
                                                                        timeout=30)
        assert live.live
        # The server holds them as separate connections, not one shared.
        if shutil.which("ss"):
            out = subprocess.run(["ss", "-tnH", "state", "established",
                                  f"( sport = :{s.grpc_port} )"], capture_output=True, text=True)
            assert len(out.stdout.strip().splitlines()) >= 300, out.stdout[:500]
    finally:
        for channel in held:
            channel.close()
        s.stop()


def test_grpc_listens_beside_the_http_port_by_default(bertrt_bin):
    """Without --grpc-port, gRPC takes the HTTP port + 1 (8000/8001 as Triton's), so a second
    server moved to another HTTP port does not clash with the first's gRPC port."""
    for _ in range(20):  # two adjacent free ports
        port = free_port()
        try:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port + 1))
            break
        except OSError:
            continue
    proc = subprocess.Popen([bertrt_bin, "serve", str(MODELS / "seq_cls"), "--http-port", str(port),
                             "--threads", "1"], stderr=subprocess.PIPE, text=True)
    try:
        wait_until_ready(proc, f"http://127.0.0.1:{port}")
        assert tg.InferenceServerClient(f"127.0.0.1:{port + 1}").is_server_ready()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0

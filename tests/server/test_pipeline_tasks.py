"""The HF Inference API's token classification and question answering, as huggingface_hub's
InferenceClient calls them (POST to the model's URL with {"inputs", "parameters"}), against
the real server serving a NER and a QA model side by side: the answers are transformers'
pipelines' (pipeline_golden.json), the errors 4xx with a JSON body."""
import json

import pytest
import requests

from conftest import pipeline_mismatch as mismatch
from server_util import MODELS, Server

NER, QA = MODELS / "token_cls", MODELS / "qa"


@pytest.fixture(scope="module")
def server(bertrt_bin):
    s = Server(bertrt_bin, [str(NER), str(QA), "--max-client-batch-size", "20"], grpc=False)
    yield s
    s.stop()


def golden(model):
    return json.loads((model / "pipeline_golden.json").read_text())["cases"]


def plain(output):
    """huggingface_hub's output elements as the pipeline's dicts (its None fields left out)."""
    if isinstance(output, list):
        return [plain(o) for o in output]
    return {k: v for k, v in vars(output).items() if v is not None}


def test_huggingface_hub_token_classification(server):
    from huggingface_hub import InferenceClient
    client = InferenceClient(model=f"{server.url}/models/token_cls")
    for case in golden(NER):
        p = case["parameters"]
        got = client.token_classification(case["text"], aggregation_strategy=p.get("aggregation_strategy"),
                                          ignore_labels=p.get("ignore_labels"), stride=p.get("stride"))
        m = mismatch(plain(got), case["output"])
        assert m is None, f"{p}: {m}"


def test_huggingface_hub_question_answering(server):
    from huggingface_hub import InferenceClient
    client = InferenceClient(model=f"{server.url}/models/qa")
    for case in golden(QA):
        got = client.question_answering(question=case["question"], context=case["context"],
                                        **case["parameters"])
        m = mismatch(plain(got), case["output"])
        assert m is None, f"{case['parameters']}: {m}"


def test_inference_api_bodies(server):
    """The same answers through /invocations and a list of inputs (one answer each)."""
    case = golden(QA)[1]
    r = requests.post(f"{server.url}/models/qa/invocations", timeout=30, json={
        "inputs": [{"question": case["question"], "context": case["context"]}] * 2,
        "parameters": case["parameters"]})
    assert r.status_code == 200, r.text
    assert mismatch(r.json(), [case["output"]] * 2) is None


@pytest.mark.parametrize("model,body,status,words", [
    ("token_cls", {"inputs": "x", "parameters": {"aggregation_strategy": "best"}}, 422,
     ["aggregation_strategy", "simple"]),
    ("token_cls", {"inputs": "x", "parameters": {"stride": 8}}, 422, ["stride", "none"]),
    ("token_cls", {"inputs": "x", "parameters": {"aggregation_strategy": "first", "stride": 64}}, 422,
     ["stride", "64"]),
    ("token_cls", {"inputs": 3}, 422, ["inputs", "string"]),
    ("token_cls", {"inputs": ""}, 422, ["empty"]),
    ("token_cls", {"input": "x"}, 422, ["inputs"]),
    # Windows count against the request's sequences (--max-client-batch-size 20).
    ("token_cls", {"inputs": "word " * 2000, "parameters": {"aggregation_strategy": "first", "stride": 8}},
     413, ["windows", "max_client_batch_size"]),
    ("qa", {"inputs": {"question": "q?"}}, 422, ["question", "context"]),
    ("qa", {"inputs": {"question": "q?", "context": "c"}, "parameters": {"top_k": "3"}}, 422, ["top_k"]),
    ("qa", {"inputs": {"question": "q?", "context": "c"}, "parameters": {"max_seq_len": 100}}, 422,
     ["max_seq_len", "64"]),
    ("qa", {"inputs": {"question": "q?", "context": "c"}, "parameters": []}, 422, ["parameters"]),
])
def test_bad_requests_get_4xx_json(server, model, body, status, words):
    r = requests.post(f"{server.url}/models/{model}", json=body, timeout=30)
    assert r.status_code == status, r.text[:300]
    error = r.json()["error"]
    for w in words:
        assert w in error, error
    assert server.alive()

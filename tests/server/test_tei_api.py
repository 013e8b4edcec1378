"""text-embeddings-inference's HTTP API against its own OpenAPI document
(tests/data/tei_openapi.json, TEI 1.9.3): every route and field, each request
and answer validated against the document, the numbers against `bertrt run`
and HF `tokenizers`, and the clients users already run (openai,
huggingface_hub's InferenceClient) pointed at the real server."""
import base64
import json
import subprocess
import sys

import numpy as np
import pytest
import requests
from openapi_schema_validator import OAS30Validator

from conftest import ROOT, run_jsonl
from server_util import MODELS, Server, close, run_outputs

SPEC = json.loads((ROOT / "tests/data/tei_openapi.json").read_text())
ERROR_TYPES = SPEC["components"]["schemas"]["ErrorType"]["enum"]


def schema_check(schema, instance):
    """Validates `instance` against an OpenAPI schema of the document (refs resolved in it)."""
    OAS30Validator({**schema, "components": SPEC["components"]}).validate(instance)


def call(s, path, body, method="post", valid_request=True, url=""):
    """Sends `body` to `url` + `path`; checks the request against the route's request schema
    (when it is meant to be valid) and the answer against the schema the document
    gives for its status (which must be one the document lists for the route)."""
    op = SPEC["paths"][path][method]
    if valid_request and body is not None:
        schema_check(op["requestBody"]["content"]["application/json"]["schema"], body)
    r = requests.post(s.url + url + path, json=body, timeout=60) if method == "post" else \
        requests.get(s.url + url + path, timeout=60)
    assert str(r.status_code) in op["responses"], (path, r.status_code, r.text)
    content = op["responses"][str(r.status_code)].get("content")
    if content:
        schema_check(content["application/json"]["schema"], r.json())
    if r.status_code >= 400 and path != "/v1/embeddings":
        assert r.json()["error_type"] in ERROR_TYPES and r.json()["error"]
    return r


def ok(s, path, body, **kw):
    r = call(s, path, body, **kw)
    assert r.status_code == 200, r.text
    return r.json()


def error(s, path, body, status, error_type=None, valid_request=False):
    r = call(s, path, body, valid_request=valid_request)
    assert r.status_code == status, r.text
    if error_type:
        assert r.json()["error_type"] == error_type, r.text
    return r.json()


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def hf_tokenizer(model_dir):
    from tokenizers import Tokenizer
    from tokenizers.implementations import BertWordPieceTokenizer
    if (model_dir / "tokenizer.json").exists():
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    else:
        tok = BertWordPieceTokenizer(str(model_dir / "vocab.txt"), lowercase=True)._tokenizer
    tok.no_padding()  # the file's own padding and truncation are not the server's
    tok.no_truncation()
    return tok


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    """A 1-label sequence-classification model (a cross-encoder: TEI's reranker)."""
    out = tmp_path_factory.mktemp("models") / "reranker"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_random_model.py"), "--preset", "tiny",
                    "--head", "seq-cls", "--num-labels", "1", "--seed", "21", "-o", str(out)],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def started(bertrt_bin, default_model, reranker):
    """started(model, *args): a server per configuration, once per module."""
    servers = {}

    def get(model, *extra):
        key = (model, extra)
        if key not in servers:
            path = {"default": default_model, "reranker": str(reranker)}.get(model, str(MODELS / model))
            servers[key] = Server(bertrt_bin, [path, *extra], grpc=False)
        return servers[key]

    yield get
    for server in servers.values():
        server.stop()


# --- Embeddings ------------------------------------------------------------------------

def test_embed_forms_and_token_ids(started, bertrt_bin, default_model):
    s = started("default")
    texts = ["hello world", "What is Deep Learning?"]
    want = [o["embedding"] for o in run_outputs(bertrt_bin, default_model, texts)]
    assert close(ok(s, "/embed", {"inputs": texts[0]}), want[:1])
    assert close(ok(s, "/embed", {"inputs": texts}), want)
    # Token ids, as /tokenize gives them, one input or a list (mixed with text).
    ids = [[t["id"] for t in toks] for toks in ok(s, "/tokenize", {"inputs": texts})]
    assert close(ok(s, "/embed", {"inputs": ids[0]}), want[:1])
    assert close(ok(s, "/embed", {"inputs": [ids[0], texts[1]]}), want)
    assert close(ok(s, "/embed", {"inputs": ids}), want)
    error(s, "/embed", {"inputs": [101, 10 ** 7, 102]}, 422, "Validation")
    error(s, "/embed", {"inputs": [[101, 102], []]}, 422, "Validation")
    error(s, "/embed", {"inputs": [101, -1, 102]}, 422, "Validation")
    error(s, "/embed", {"inputs": []}, 400, "Empty")  # [] is ambiguous in the oneOf
    error(s, "/embed", {"inputs": {"a": 1}}, 422, "Validation")
    error(s, "/embed", {"text": "no inputs"}, 422, "Validation")
    long_ids = [101] + [2146] * 300 + [102]
    error(s, "/embed", {"inputs": long_ids}, 422, "Validation", valid_request=True)
    cut = ok(s, "/embed", {"inputs": long_ids, "truncate": True})
    assert close(cut, ok(s, "/embed", {"inputs": long_ids[:256]}))
    left = ok(s, "/embed", {"inputs": long_ids, "truncate": True, "truncation_direction": "Left"})
    assert close(left, ok(s, "/embed", {"inputs": long_ids[-256:]}))


def test_normalize_false_and_dimensions(started, bertrt_bin, default_model):
    s = started("default")
    text = "Matryoshka embeddings keep their first dimensions"
    # The mean-pooled vector before the model's Normalize module, from the CLI's hidden states.
    _, out, _ = run_jsonl(bertrt_bin, ["run", default_model, "--output", "last_hidden_state"],
                          [{"text": text}])
    raw = np.mean(np.asarray(out[0]["last_hidden_state"], dtype=np.float64), axis=0)
    got = np.asarray(ok(s, "/embed", {"inputs": text, "normalize": False})[0])
    assert close(got, raw) and abs(np.linalg.norm(got) - 1) > 0.05
    normalized = ok(s, "/embed", {"inputs": text})[0]
    assert close(normalized, unit(raw))
    # dimensions: the first N, then normalized (or not).
    assert close(ok(s, "/embed", {"inputs": text, "dimensions": 64})[0], unit(raw[:64]))
    assert close(ok(s, "/embed", {"inputs": text, "dimensions": 64, "normalize": False})[0], raw[:64])
    assert close(ok(s, "/embed", {"inputs": text, "dimensions": 384})[0], normalized)
    error(s, "/embed", {"inputs": text, "dimensions": 385}, 422, "Validation", valid_request=True)
    # 0: the full width (Infinity's client sends it); below 0 is refused.
    assert close(ok(s, "/embed", {"inputs": text, "dimensions": 0})[0], normalized)
    error(s, "/embed", {"inputs": text, "dimensions": -1}, 422, "Validation")
    error(s, "/embed", {"inputs": text, "normalize": "yes"}, 422, "Validation")


def test_normalize_on_a_model_without_normalize_module(started, bertrt_bin):
    s = started("sentence_cls")  # CLS pooling, no Normalize module
    want = run_outputs(bertrt_bin, str(MODELS / "sentence_cls"), ["hello world"])[0]["embedding"]
    assert close(ok(s, "/embed", {"inputs": "hello world", "normalize": False})[0], want)
    assert close(ok(s, "/embed", {"inputs": "hello world"})[0], unit(want))
    assert close(ok(s, "/embed", {"inputs": "hello world", "dimensions": 8})[0], unit(want[:8]))


def test_prompt_name_as_sentence_transformers(started):
    """The model's prompts (config_sentence_transformers.json): prompt_name picks one, the
    default_prompt_name applies without it; the vectors are sentence-transformers' own
    (golden prompt_runs; /embed normalizes again after truncate_dim, so by cosine)."""
    model = "st_concat_prompts"
    golden = json.loads((MODELS / model / "golden.json").read_text())
    s = started(model)
    texts = [x["text"] for x in golden["inputs"]]
    for name, want in list(golden["prompt_runs"].items()) + [(None, golden["prompt_runs"]["query"])]:
        body = {"inputs": texts, "truncate": True, **({"prompt_name": name} if name else {})}
        got = ok(s, "/embed", body)
        for g, w in zip(got, want):
            assert np.dot(unit(g), unit(w)) > 0.9999, (name, g, w)
    # /tokenize shows the prompt's tokens first, as TEI.
    tok = hf_tokenizer(MODELS / model)
    for name, prompt in [("document", ""), ("passage", "passage: "), (None, "query: ")]:
        body = {"inputs": "hello", **({"prompt_name": name} if name else {})}
        got = [t["id"] for t in ok(s, "/tokenize", body)[0]]
        assert got == tok.encode(prompt + "hello").ids, name
    err = error(s, "/embed", {"inputs": "hello", "prompt_name": "nope"}, 422, "Validation",
                valid_request=True)
    assert '"nope"' in err["error"] and '"query"' in err["error"]


def pool_from(states, start, modes=("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean",
                                     "lasttoken")):
    """sentence-transformers' pooling of one sequence's token states with the tokens before
    `start` masked out (include_prompt false), each mode concatenated."""
    x, out = np.asarray(states, dtype=np.float64), []
    kept = x[start:]
    weights = np.arange(start + 1, len(x) + 1, dtype=np.float64)[:, None]
    for mode in modes:
        out.append({"cls": kept[0], "max": kept.max(0), "mean": kept.mean(0),
                    "mean_sqrt_len_tokens": kept.sum(0) / np.sqrt(len(kept)),
                    "weightedmean": (kept * weights).sum(0) / weights.sum(),
                    "lasttoken": kept[-1]}[mode])
    return np.concatenate(out)


def test_prompt_left_out_of_the_pooling(started):
    """include_prompt false (1_Pooling): the prompt's tokens are left out of every pooling
    mode, as sentence-transformers' encode does (golden prompt_runs, each prompt, the
    default without prompt_name, an empty prompt leaving nothing out); normalize: false
    recomputes the same pooling; a cut from the left takes the prompt's tokens first, and
    pooling starts after those left."""
    model = "st_exclude_prompt"
    golden = json.loads((MODELS / model / "golden.json").read_text())
    s = started(model)
    texts = [x["text"] for x in golden["inputs"]]
    for name, want in list(golden["prompt_runs"].items()) + [(None, golden["prompt_runs"]["query"])]:
        body = {"inputs": texts, "truncate": True, **({"prompt_name": name} if name else {})}
        for g, w in zip(ok(s, "/embed", body), want):
            assert close(g, w), (name, g, w)
        raw = ok(s, "/embed", {**body, "normalize": False})
        for g, w in zip(raw, want):
            assert close(unit(g), w), (name, g, w)
    # Cut from the left: the prompt's tokens go first. Pooling then starts after [CLS] and
    # what is left of the prompt (query: 10 tokens before the text).
    tok = hf_tokenizer(MODELS / model)
    prompt = "Represent this sentence for searching relevant passages: "
    prompt_tokens = len(tok.encode(prompt).ids) - 1  # sentence-transformers' prompt_length
    for words in (200, 41):  # all of the prompt cut, and part of it
        text = " ".join(["word"] * words)
        body = {"inputs": text, "truncate": True, "truncation_direction": "Left",
                "prompt_name": "query"}
        dropped = len(tok.encode(prompt + text).ids) - golden["max_seq_length"]
        start = max(1, prompt_tokens - dropped)
        states = ok(s, "/embed_all", body)[0]
        assert len(states) == golden["max_seq_length"]
        assert close(ok(s, "/embed", body)[0], unit(pool_from(states, start))), words


def test_prompt_that_fills_the_input(started, bertrt_bin, tmp_path):
    """A prompt left out of the pooling that takes the model's whole length leaves no text to
    pool (sentence-transformers would return zeros): a clear error in the server and in
    `bertrt run`, which still answers its other lines."""
    import shutil
    model = tmp_path / "long_prompt"
    shutil.copytree(MODELS / "st_exclude_prompt", model)
    settings = json.loads((model / "config_sentence_transformers.json").read_text())
    settings["prompts"]["long"] = "word " * 60  # max_seq_length is 48
    (model / "config_sentence_transformers.json").write_text(json.dumps(settings))
    s = started(str(model))
    err = error(s, "/embed", {"inputs": "hello", "truncate": True, "prompt_name": "long"}, 422,
                "Validation", valid_request=True)
    assert "prompt" in err["error"] and "include_prompt" in err["error"], err
    assert len(ok(s, "/embed", {"inputs": "hello", "prompt_name": "short"})[0]) == 32 * 6
    code, out, _ = run_jsonl(bertrt_bin, ["run", str(model), "--prompt-name", "long"],
                             [{"text": "hello"}], check_exit=None)
    assert code == 1 and "include_prompt" in out[0]["error"], out


def test_normalize_false_with_concatenated_pooling(started, bertrt_bin):
    """normalize: false on a model whose Normalize follows concatenated pooling, and on one
    whose vector goes through a Dense module before it: the vector as the Dense module gave
    it, against numpy's weighted mean of the states and Dense over the module's own weights."""
    from safetensors.numpy import load_file
    s = started("st_legacy_concat")  # cls + max + mean, Dense, no Normalize
    want = run_outputs(bertrt_bin, str(MODELS / "st_legacy_concat"), ["hello world"])[0]["embedding"]
    assert close(ok(s, "/embed", {"inputs": "hello world", "normalize": False})[0], want)
    model = MODELS / "st_weightedmean_dense"  # weightedmean, Dense (tanh), Normalize
    d = started("st_weightedmean_dense")
    dense = load_file(str(model / "2_Dense" / "model.safetensors"))
    texts = ["hello world", "a longer sentence about dense modules and their vectors"]
    for text, states in zip(texts, ok(d, "/embed_all", {"inputs": texts})):
        pooled = pool_from(states, 0, ("weightedmean",))
        want = np.tanh(dense["linear.weight"].astype(np.float64) @ pooled + dense["linear.bias"])
        got = np.asarray(ok(d, "/embed", {"inputs": text, "normalize": False})[0])
        assert close(got, want) and abs(np.linalg.norm(got) - 1) > 0.05, text
        assert close(ok(d, "/embed", {"inputs": text})[0], unit(want)), text
        assert close(ok(d, "/embed", {"inputs": text, "normalize": False, "dimensions": 5})[0],
                     want[:5]), text


def test_truncation_direction(started):
    s = started("sentence_mean")  # max_seq_length 48
    words = [f"w{i}" for i in range(80)]
    text = " ".join(words)
    tok = hf_tokenizer(MODELS / "sentence_mean")
    tok.enable_truncation(48, direction="left")
    left_ids = tok.encode(text).ids
    tok.enable_truncation(48, direction="right")
    right_ids = tok.encode(text).ids
    assert left_ids != right_ids
    right = ok(s, "/embed", {"inputs": text, "truncate": True})
    assert close(right, ok(s, "/embed", {"inputs": right_ids}))
    assert close(ok(s, "/embed", {"inputs": text, "truncate": True, "truncation_direction": "Right"}), right)
    for direction in ("Left", "left"):
        left = ok(s, "/embed", {"inputs": text, "truncate": True, "truncation_direction": direction},
                  valid_request=direction == "Left")
        assert close(left, ok(s, "/embed", {"inputs": left_ids}))
        assert not close(left, right)
    error(s, "/embed", {"inputs": text, "truncate": True, "truncation_direction": "Middle"}, 422,
          "Validation")
    error(s, "/embed", {"inputs": text}, 422, "Validation", valid_request=True)  # too long


def test_truncation_left_on_pairs(started):
    """/predict pairs cut from the left: the ids HF tokenizers' longest_first left gives."""
    s = started("seq_cls")  # 64 positions
    a, b = " ".join(f"a{i}" for i in range(50)), " ".join(f"b{i}" for i in range(30))
    tok = hf_tokenizer(MODELS / "seq_cls")
    tok.enable_truncation(64, direction="left")
    enc = tok.encode(a, b)
    infer = {"inputs": [
        {"name": "input_ids", "datatype": "INT64", "shape": [1, len(enc.ids)], "data": enc.ids},
        {"name": "token_type_ids", "datatype": "INT64", "shape": [1, len(enc.ids)], "data": enc.type_ids}]}
    logits = s.post("/v2/models/seq_cls/infer", infer).json()["outputs"][0]["data"]
    raw = ok(s, "/predict", {"inputs": [a, b], "truncate": True, "truncation_direction": "Left",
                             "raw_scores": True})
    got = [p["score"] for p in sorted(raw, key=lambda p: p["label"])]
    assert close(got, logits)
    right = ok(s, "/predict", {"inputs": [a, b], "truncate": True, "raw_scores": True})
    assert not close([p["score"] for p in sorted(right, key=lambda p: p["label"])], logits)


def test_embed_all(started, bertrt_bin, default_model):
    s = started("default")
    _, out, _ = run_jsonl(bertrt_bin, ["run", default_model, "--output", "last_hidden_state"],
                          [{"text": "hello world"}, {"text": "a longer second input"}])
    got = ok(s, "/embed_all", {"inputs": ["hello world", "a longer second input"]})
    assert len(got) == 2 and len(got[0]) == 4 and len(got[0][0]) == 384
    for g, o in zip(got, out):
        assert close(g, o["last_hidden_state"])
    assert close(ok(s, "/embed_all", {"inputs": "hello world"}), [out[0]["last_hidden_state"]])


def test_similarity(started):
    s = started("default")
    body = {"inputs": {"source_sentence": "How do I bake bread?",
                       "sentences": ["A recipe for baking bread", "The stock market fell", "Bread baking"]}}
    got = ok(s, "/similarity", body)
    vecs = ok(s, "/embed", {"inputs": [body["inputs"]["source_sentence"], *body["inputs"]["sentences"]]})
    want = [float(np.dot(unit(vecs[0]), unit(v))) for v in vecs[1:]]
    assert close(got, want, 1e-5) and got[0] > got[1]
    got = ok(s, "/similarity", {**body, "parameters": {"truncate": True, "truncation_direction": "Left"}})
    assert close(got, want, 1e-5)
    error(s, "/similarity", {"inputs": {"source_sentence": "x", "sentences": []}}, 400, "Empty",
          valid_request=True)
    error(s, "/similarity", {"inputs": "not an object"}, 422, "Validation")


def test_embed_sparse_needs_a_splade_model(started):
    s = started("default")
    r = error(s, "/embed_sparse", {"inputs": "hello"}, 424, "Backend", valid_request=True)
    assert "SPLADE" in r["error"]


# --- Classification ---------------------------------------------------------------

def softmax(x):
    e = np.exp(np.asarray(x, dtype=np.float64) - np.max(x))
    return e / e.sum()


def test_predict_forms(started, bertrt_bin):
    s = started("seq_cls")
    runs = run_jsonl(bertrt_bin, ["run", str(MODELS / "seq_cls")],
                     [{"text": "a"}, {"text": "b"}, {"text": "a", "text_pair": "b"}])[1]
    probs = [softmax(o["logits"]) for o in runs]

    def by_label(preds):
        return [p["score"] for p in sorted(preds, key=lambda p: p["label"])]

    single = ok(s, "/predict", {"inputs": "a"})
    assert close(by_label(single), probs[0])
    assert [p["score"] for p in single] == sorted((p["score"] for p in single), reverse=True)
    assert close(by_label(ok(s, "/predict", {"inputs": ["a", "b"]})), probs[2])  # a pair
    batch = ok(s, "/predict", {"inputs": [["a"], ["b"]]})
    assert len(batch) == 2 and close(by_label(batch[0]), probs[0]) and close(by_label(batch[1]), probs[1])
    mixed = ok(s, "/predict", {"inputs": [["a"], ["a", "b"]]})
    assert close(by_label(mixed[0]), probs[0]) and close(by_label(mixed[1]), probs[2])
    raw = ok(s, "/predict", {"inputs": "a", "raw_scores": True})
    assert close(by_label(raw), runs[0]["logits"])
    # bertrt's own forms: more than two strings, or strings as batch items, are texts.
    three = ok(s, "/predict", {"inputs": ["a", "b", "a"]}, valid_request=False)
    assert len(three) == 3 and close(by_label(three[1]), probs[1])
    assert close(by_label(ok(s, "/predict", {"inputs": [["a", "b"], "b"]}, valid_request=False)[1]), probs[1])
    error(s, "/predict", {"inputs": [["a", "b", "c"]]}, 422, "Validation")
    error(s, "/predict", {"inputs": []}, 400, "Empty")
    # A 3-label classifier is not a reranker, nor an embedding model.
    r = error(s, "/rerank", {"query": "q", "texts": ["a"]}, 424, "Backend", valid_request=True)
    assert "re-ranker" in r["error"] and "/predict" in r["error"]
    error(s, "/embed", {"inputs": "a"}, 424, "Backend", valid_request=True)
    error(s, "/embed_all", {"inputs": "a"}, 424, "Backend", valid_request=True)
    error(s, "/v1/embeddings", {"input": "a"}, 424, valid_request=True)
    error(started("default"), "/predict", {"inputs": "a"}, 424, "Backend", valid_request=True)


def test_one_label_model_is_a_reranker_with_sigmoid(started, bertrt_bin, reranker):
    s = started("reranker")
    texts = ["first passage", "second one here", "third"]
    logits = [o["logits"][0] for o in run_jsonl(
        bertrt_bin, ["run", str(reranker)], [{"text": "query", "text_pair": t} for t in texts])[1]]
    sigmoid = 1 / (1 + np.exp(-np.asarray(logits)))
    info = ok(s, "/info", None, method="get")
    label = json.loads((reranker / "config.json").read_text())["id2label"]["0"]
    assert info["model_type"] == {"reranker": {"id2label": {"0": label}, "label2id": {label: 0}}}
    ranked = ok(s, "/rerank", {"query": "query", "texts": texts, "return_text": True})
    assert sorted(r["index"] for r in ranked) == [0, 1, 2]
    for r in ranked:
        assert close(r["score"], sigmoid[r["index"]]) and r["text"] == texts[r["index"]]
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)
    raw = ok(s, "/rerank", {"query": "query", "texts": texts, "raw_scores": True})
    assert all(close(r["score"], logits[r["index"]]) for r in raw)
    pred = ok(s, "/predict", {"inputs": ["query", texts[0]]})
    assert len(pred) == 1 and close(pred[0]["score"], sigmoid[0]) and 0 < pred[0]["score"] < 1
    error(s, "/rerank", {"query": "q", "texts": []}, 400, "Empty", valid_request=True)
    error(s, "/rerank", {"query": 3, "texts": ["a"]}, 422, "Validation")


def test_cohere_and_jina_rerank_with_the_cohere_client(started, reranker):
    """POST /v1/rerank and /v2/rerank in Cohere's (and Jina's) shape: the real cohere client,
    v1 and v2, gets /rerank's scores best first, cut to top_n, documents as text or objects."""
    import cohere
    s = started("reranker")
    docs = ["first passage", "second one here", "third", "a fourth, much longer passage " * 200]
    want = ok(s, "/rerank", {"query": "query", "texts": docs, "truncate": True})
    v2 = cohere.ClientV2(api_key="none", base_url=s.url).rerank(
        model="reranker", query="query", documents=docs, top_n=3)
    assert [(r.index, r.relevance_score) for r in v2.results] == [(w["index"], w["score"]) for w in want[:3]]
    v1 = cohere.Client(api_key="none", base_url=s.url).rerank(
        model="reranker", query="query", documents=[{"text": d} for d in docs], return_documents=True)
    assert [r.index for r in v1.results] == [w["index"] for w in want]
    assert [r.document.text for r in v1.results] == [docs[w["index"]] for w in want]
    # Jina's body is the same; its results carry the document when asked.
    # (Neither route is in TEI's API document: plain requests.)
    j = s.post("/v1/rerank", {"model": "x", "query": "query", "documents": docs[:2], "top_n": 1,
                              "return_documents": True}).json()
    assert len(j["results"]) == 1 and j["results"][0]["document"]["text"] in docs[:2]
    for body in ({"query": "q", "documents": "a"}, {"query": "q", "documents": ["a"], "top_n": 0},
                 {"query": "q", "documents": [3]}, {"documents": ["a"]}):
        r = s.post("/v2/rerank", body)
        assert r.status_code == 422 and r.json()["error_type"] == "Validation", r.text


def test_infinity_client_rerank(started, reranker):
    """Infinity's own client (infinity_client from PyPI) posts {query, documents} to /rerank:
    it gets TEI's /rerank scores best first in Infinity's answer (results, model, usage), cut
    to top_n, documents when asked; TEI's body on the same path answers as before."""
    from infinity_client import Client
    from infinity_client.api.default import rerank
    from infinity_client.models import RerankInput
    s = started("reranker")
    docs = ["first passage", "second one here", "third", "a fourth, much longer passage " * 200]
    want = ok(s, "/rerank", {"query": "query", "texts": docs, "truncate": True})
    got = rerank.sync(client=Client(base_url=s.url),
                      body=RerankInput(query="query", documents=docs, top_n=3,
                                       return_documents=True))
    assert [(r.index, r.relevance_score) for r in got.results] == \
        [(w["index"], w["score"]) for w in want[:3]]
    assert [r.document for r in got.results] == [docs[w["index"]] for w in want[:3]]
    assert got.model == "reranker" and got.usage.prompt_tokens > 0
    # (Infinity's body is not in TEI's API document: plain requests.)
    raw = s.post("/rerank", {"query": "query", "documents": docs[:2], "raw_scores": True}).json()
    want_raw = ok(s, "/rerank", {"query": "query", "texts": docs[:2], "raw_scores": True})
    assert [(r["index"], r["relevance_score"], r["document"]) for r in raw["results"]] == \
        [(w["index"], w["score"], None) for w in want_raw]
    for body in ({"query": "q", "documents": "a"}, {"query": "q", "documents": [3]},
                 {"query": "q", "documents": ["a"], "top_n": 0}):
        r = s.post("/rerank", body)
        assert r.status_code == 422 and r.json()["error_type"] == "Validation", r.text
    r = s.post("/rerank", {"query": "q", "documents": []})
    assert r.status_code == 400 and r.json()["error_type"] == "Empty", r.text


# --- Families beyond BERT, served -----------------------------------------------------

def golden_inputs(model):
    return json.loads((MODELS / model / "golden.json").read_text())["inputs"]


@pytest.mark.parametrize("model", ["xlmr_reranker", "modernbert_reranker"])
def test_cross_encoders_rerank_as_transformers(started, model):
    """Cross-encoders (bge-reranker's XLM-RoBERTa, gte-reranker-modernbert's
    ModernBERT) on /rerank: the score of the golden pair is the sigmoid of
    transformers' own logit."""
    s = started(model)
    pair = next(g for g in golden_inputs(model) if "text_pair" in g)
    info = ok(s, "/info", None, method="get")
    assert "reranker" in info["model_type"]
    ranked = ok(s, "/rerank", {"query": pair["text"], "texts": [pair["text_pair"], "hello world"]})
    score = next(r["score"] for r in ranked if r["index"] == 0)
    assert abs(score - 1 / (1 + np.exp(-pair["logits"][0]))) < 1e-5
    raw = ok(s, "/rerank", {"query": pair["text"], "texts": [pair["text_pair"]], "raw_scores": True})
    assert abs(raw[0]["score"] - pair["logits"][0]) < 1e-4 * max(1, abs(pair["logits"][0]))


@pytest.mark.parametrize("model", ["xlmr_sentence_mean", "distilbert_sentence_cls",
                                   "mpnet_sentence_mean", "modernbert_sentence_mean"])
def test_family_embedders_on_embed_and_openai(started, model):
    """multilingual-e5's and msmarco-distilbert's shapes on TEI's and OpenAI's
    routes: sentence-transformers' own embeddings (golden.json)."""
    s = started(model)
    golden = golden_inputs(model)
    texts = [g["text"] for g in golden]
    want = np.asarray([g["sentence_embedding"] for g in golden])
    # TEI normalizes unless asked not to; sentence-transformers' own vector
    # is normalized only where the model has a Normalize module.
    got = np.asarray(ok(s, "/embed", {"inputs": texts, "truncate": True}))
    assert np.abs(got - [unit(w) for w in want]).max() <= 1e-5
    data = ok(s, "/v1/embeddings", {"input": texts[:2], "model": model})["data"]
    assert close([d["embedding"] for d in data], [unit(w) for w in want[:2]])


@pytest.mark.parametrize("model", ["splade_bert", "xlmr_splade", "splade_st_sum"])
def test_splade_on_embed_sparse_as_transformers(started, model):
    """SPLADE (a ...ForMaskedLM directory, a sentence-transformers SparseEncoder)
    on /embed_sparse: TEI's [{"index", "value"}] of the non-zero entries, in
    id order, equal to the reference's (golden.json); /embed gives the whole
    vector only with normalize: false, as TEI; /info names the pooling."""
    s = started(model)
    golden = [g for g in golden_inputs(model) if "text_pair" not in g]
    texts = [g["text"] for g in golden]
    vocab = json.loads((MODELS / model / "config.json").read_text())["vocab_size"]
    got = ok(s, "/embed_sparse", {"inputs": texts, "truncate": True})
    assert len(got) == len(texts)
    for entries, g in zip(got, golden):
        indices = [e["index"] for e in entries]
        assert indices == sorted(indices) and all(e["value"] > 0 for e in entries)
        want = np.zeros(vocab)
        want[g["sparse_embedding"]["indices"]] = g["sparse_embedding"]["values"]
        have = np.zeros(vocab)
        have[indices] = [e["value"] for e in entries]
        assert np.abs(have - want).max() <= 1e-4 * np.abs(want).max(), g["text"]
    single = ok(s, "/embed_sparse", {"inputs": texts[0]})
    assert len(single) == 1 and len(single[0]) > 0
    r = error(s, "/embed", {"inputs": texts[0]}, 424, "Backend", valid_request=True)
    assert "normalize" in r["error"] and "/embed_sparse" in r["error"]
    whole = ok(s, "/embed", {"inputs": texts[0], "normalize": False})
    assert len(whole[0]) == vocab
    dense = np.zeros(vocab)
    dense[[e["index"] for e in single[0]]] = [e["value"] for e in single[0]]
    assert np.array_equal(np.asarray(whole[0], dtype=np.float32), dense.astype(np.float32))
    assert ok(s, "/info", None, method="get")["model_type"] == {"embedding": {"pooling": "splade"}}


def test_distilbert_classifier_ignores_token_types_as_transformers_does(started):
    """DistilBERT takes no token types: a KServe client sending BERT-style
    token_type_ids (ones on the second segment) gets what transformers gives."""
    s = started("distilbert_seq_cls")
    pair = next(g for g in golden_inputs("distilbert_seq_cls") if "text_pair" in g)
    assert 1 in pair["token_type_ids"]
    n = len(pair["input_ids"])
    r = requests.post(f"{s.url}/v2/models/distilbert_seq_cls/infer", json={"inputs": [
        {"name": "input_ids", "datatype": "INT64", "shape": [1, n], "data": pair["input_ids"]},
        {"name": "token_type_ids", "datatype": "INT64", "shape": [1, n],
         "data": pair["token_type_ids"]}]}, timeout=30)
    assert r.status_code == 200, r.text
    got = r.json()["outputs"][0]["data"]
    assert np.abs(np.asarray(got) - pair["logits"]).max() <= 1e-4 * np.abs(pair["logits"]).max()
    pred = ok(s, "/predict", {"inputs": [[pair["text"], pair["text_pair"]]]})
    assert pred[0][0]["label"] == ["CLASS_0", "CLASS_1", "CLASS_2"][int(np.argmax(pair["logits"]))]


# --- Tokenizer routes -----------------------------------------------------------------

def test_tokenize(started, default_model):
    from pathlib import Path
    s = started("default")
    tok = hf_tokenizer(Path(default_model))
    text = "Naïve café owners, in Zürich!"
    enc = tok.encode(text)
    got = ok(s, "/tokenize", {"inputs": text})[0]
    assert [t["id"] for t in got] == enc.ids
    raw = text.encode()
    for t in got:
        if t["special"]:
            assert t["start"] is None and t["stop"] is None and t["text"] in ("[CLS]", "[SEP]")
        else:  # byte offsets into the input, and the input's own text there (as TEI)
            assert t["text"] == raw[t["start"]:t["stop"]].decode()
    plain = ok(s, "/tokenize", {"inputs": [text, "hello"], "add_special_tokens": False})
    assert [t["id"] for t in plain[0]] == tok.encode(text, add_special_tokens=False).ids
    assert not any(t["special"] for t in plain[0]) and len(plain) == 2
    error(s, "/tokenize", {"inputs": []}, 400, "Empty", valid_request=True)
    error(s, "/tokenize", {"inputs": "x", "add_special_tokens": "no"}, 422, "Validation")


def test_decode_as_hf_tokenizers(started, default_model):
    from pathlib import Path
    s = started("default")
    tok = hf_tokenizer(Path(default_model))
    texts = ["Hello, world! It's a test.", "Don't stop: 3.14 is pi?", "如何在GPU上加速BERT模型的推理？",
             "unaffable tokenization [MASK] here", "naïve café"]
    for text in texts:
        ids = tok.encode(text).ids
        for skip in (True, False):
            got = ok(s, "/decode", {"ids": ids, "skip_special_tokens": skip})
            assert got == [tok.decode(ids, skip_special_tokens=skip)], (text, skip)
    batch = [tok.encode(t).ids for t in texts]
    assert ok(s, "/decode", {"ids": batch}) == tok.decode_batch(batch)
    error(s, "/decode", {"ids": []}, 400, "Empty")
    error(s, "/decode", {"ids": [[101], []]}, 400, "Empty", valid_request=True)
    error(s, "/decode", {"ids": [101, 10 ** 6]}, 422, "Validation", valid_request=True)


# --- /info, /health, POST / -------------------------------------------------------------

def test_info_health_and_root_dispatch(started, bertrt_bin, default_model, reranker):
    s = started("default")
    info = ok(s, "/info", None, method="get")
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["model_dtype"] == "float32" and info["auto_truncate"] is False
    assert info["served_model_name"] == info["model_id"] == "all-MiniLM-L6-v2"
    assert info["max_input_length"] == 256 and info["tokenization_workers"] >= 1
    r = call(s, "/health", None, method="get")
    assert r.status_code == 200
    assert requests.get(s.url + "/").status_code == 200 and requests.get(s.url + "/ping").status_code == 200
    # POST / and /invocations: by model type, as TEI.
    want = ok(s, "/embed", {"inputs": "hello"})
    sim_body = {"inputs": {"source_sentence": "a", "sentences": ["a", "b"]}}
    for path in ("/", "/invocations"):
        assert close(requests.post(s.url + path, json={"inputs": "hello"}).json(), want)
        assert close(requests.post(s.url + path, json=sim_body).json(), ok(s, "/similarity", sim_body))
    cls = started("seq_cls", "--auto-truncate")
    info = ok(cls, "/info", None, method="get")
    labels = {"0": "CLASS_0", "1": "CLASS_1", "2": "CLASS_2"}
    assert info["model_type"] == {"classifier": {"id2label": labels,
                                                 "label2id": {v: int(k) for k, v in labels.items()}}}
    assert info["auto_truncate"] is True
    for path in ("/", "/invocations"):
        assert requests.post(cls.url + path, json={"inputs": "a"}).json() == ok(cls, "/predict", {"inputs": "a"})
    rr = started("reranker")
    body = {"query": "q", "texts": ["a", "b"]}
    for path in ("/", "/invocations"):
        assert requests.post(rr.url + path, json=body).json() == ok(rr, "/rerank", body)
        assert requests.post(rr.url + path, json={"inputs": ["q", "a"]}).json() == \
            ok(rr, "/predict", {"inputs": ["q", "a"]})


def test_max_client_batch_size_on_every_list(started):
    s = started("default", "--max-client-batch-size", "4")
    assert ok(s, "/info", None, method="get")["max_client_batch_size"] == 4
    five = ["a", "b", "c", "d", "e"]
    bodies = {
        "/embed": {"inputs": five}, "/embed_all": {"inputs": five}, "/embed_sparse": {"inputs": five},
        "/tokenize": {"inputs": five}, "/decode": {"ids": [[101]] * 5},
        "/similarity": {"inputs": {"source_sentence": "a", "sentences": five[:4]}},
        "/v1/embeddings": {"input": five},
    }
    for path, body in bodies.items():
        r = call(s, path, body)
        assert r.status_code == 413, (path, r.text)
        message = r.json()["message"] if path == "/v1/embeddings" else r.json()["error"]
        assert "batch size 5 > maximum allowed batch size 4" in message
    assert call(s, "/embed", {"inputs": five[:4]}).status_code == 200
    cls = started("seq_cls", "--max-client-batch-size", "4")
    assert call(cls, "/predict", {"inputs": [[t] for t in five]}).status_code == 413
    assert call(cls, "/predict", {"inputs": [[t] for t in five[:4]]}).status_code == 200
    rr = started("reranker", "--max-client-batch-size", "4")
    assert call(rr, "/rerank", {"query": "q", "texts": five}).status_code == 413


def test_errors_keep_kserve_shape(started):
    """TEI's error shape is for the TEI routes; KServe's stays {"error"}."""
    s = started("seq_cls")
    r = s.post("/v2/models/seq_cls/infer", {"inputs": []})
    assert r.status_code == 400 and set(r.json()) == {"error"}
    r = requests.post(s.url + "/embed", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error_type"] == "Validation"
    error(s, "/predict", {"inputs": "a", "prompt_name": "query"}, 422, "Validation", valid_request=True)


# --- OpenAI and Hugging Face clients ---------------------------------------------------------

def test_openai_route_and_client(started, bertrt_bin, default_model):
    import openai
    s = started("default", "--max-client-batch-size", "8")
    texts = ["hello world", "the quick brown fox"]
    want = [o["embedding"] for o in run_outputs(bertrt_bin, default_model, texts)]
    got = ok(s, "/v1/embeddings", {"input": texts, "model": "all-MiniLM-L6-v2"})
    tokens = sum(len(t) for t in ok(s, "/tokenize", {"inputs": texts}))
    assert close([d["embedding"] for d in got["data"]], want) and got["usage"]["prompt_tokens"] == tokens
    b64 = ok(s, "/v1/embeddings", {"input": texts, "encoding_format": "base64"})
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in b64["data"]]
    assert all(np.array_equal(d, np.asarray(g["embedding"], dtype=np.float32))
               for d, g in zip(decoded, got["data"]))
    dims = ok(s, "/v1/embeddings", {"input": texts, "dimensions": 32})
    assert close([d["embedding"] for d in dims["data"]],
                 [ok(s, "/embed", {"inputs": t, "dimensions": 32})[0] for t in texts])
    r = error(s, "/v1/embeddings", {"input": texts, "dimensions": 999}, 422, valid_request=True)
    assert r["error"]["param"] == "dimensions" and "dimensions" in r["error"]["message"]
    assert r["error_type"] == "Validation" and r["code"] == 422
    error(s, "/v1/embeddings", {"input": texts, "encoding_format": "hex"}, 422)

    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
    resp = client.embeddings.create(input=texts, model="all-MiniLM-L6-v2")  # base64 by default
    assert close([d.embedding for d in resp.data], want)
    resp = client.embeddings.create(input=texts, model="m", encoding_format="float", dimensions=32)
    assert close([d.embedding for d in resp.data], [d["embedding"] for d in dims["data"]])
    with pytest.raises(openai.APIStatusError) as e:
        client.embeddings.create(input=["x"] * 9, model="m")
    assert e.value.status_code == 413
    assert "maximum allowed batch size 8" in e.value.message
    assert e.value.body["message"].startswith("batch size 9")  # the "error" object the client reads
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client.embeddings.create(input=["x"], model="m", dimensions=1000)
    assert "dimensions" in e.value.message and e.value.body["param"] == "dimensions"


def test_a_thousand_texts_in_one_openai_request_by_default(started, bertrt_bin, default_model):
    """LangChain's OpenAIEmbeddings sends up to 1,000 texts a request (its chunk_size): the
    default cap is OpenAI's 2,048, and the request runs in batches inside."""
    import openai
    s = started("default")
    assert ok(s, "/info", None, method="get")["max_client_batch_size"] == 2048
    texts = [f"text number {i} of a long list" for i in range(1000)]
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=300)
    resp = client.embeddings.create(input=texts, model="all-MiniLM-L6-v2", encoding_format="float")
    assert [d.index for d in resp.data] == list(range(1000))
    want = [o["embedding"] for o in run_outputs(bertrt_bin, default_model, [texts[0], texts[999]])]
    assert close([resp.data[0].embedding, resp.data[999].embedding], want)


def test_models_listed_as_openai_and_infinity_clients_read_them(started, bertrt_bin, tmp_path):
    import openai
    import time
    repo = tmp_path / "repo"
    for name, version, model in (("embedder", "1", "sentence_mean"), ("embedder", "2", "sentence_mean"),
                                 ("classifier", "1", "seq_cls"), ("ranker", "1", "xlmr_reranker")):
        src = MODELS / model
        (repo / name / version).mkdir(parents=True)
        for f in src.iterdir():
            (repo / name / version / f.name).symlink_to(f)
    (repo / "embedder" / "config.pbtxt").write_text('version_policy: { all: {} }\n')
    before = int(time.time())
    s = Server(bertrt_bin, ["--model-repository", str(repo)], grpc=False)
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
        listed = client.models.list()
        names = sorted(m.id for m in listed.data)
        assert names == sorted(p.name for p in repo.iterdir())  # one entry per name, not per version
        for m in listed.data:
            assert m.object == "model" and m.owned_by == "bertrt" and before - 1 <= m.created <= time.time() + 1
        assert client.models.retrieve("classifier").id == "classifier"
        with pytest.raises(openai.NotFoundError) as e:
            client.models.retrieve("nope")
        assert "nope" in e.value.message
        # Infinity's client reads GET /models, with what each model can be called for.
        cards = {m["id"]: m for m in requests.get(s.url + "/models", timeout=10).json()["data"]}
        assert cards["embedder"]["capabilities"] == ["embed"]
        assert cards["classifier"]["capabilities"] == ["classify"]
        assert cards["ranker"]["capabilities"] == ["rerank"]
    finally:
        s.stop()


def test_huggingface_hub_inference_client(started, bertrt_bin, default_model):
    from huggingface_hub import InferenceClient
    s = started("default")
    client = InferenceClient(base_url=s.url)
    want = run_outputs(bertrt_bin, default_model, ["hello world"])[0]["embedding"]
    assert close(client.feature_extraction("hello world"), [want])
    sims = client.sentence_similarity("How do I bake bread?", other_sentences=["Baking bread", "Stocks fell"])
    assert close(sims, ok(s, "/similarity", {"inputs": {"source_sentence": "How do I bake bread?",
                                                        "sentences": ["Baking bread", "Stocks fell"]}}))
    cls = started("seq_cls")
    # text_classification posts the HF Inference API's task body (a "parameters" object, empty
    # by default) to the model's URL: it gets that API's answer, every label best first as
    # /predict ranks them, or top_k of them, through function_to_apply's function.
    client = InferenceClient(base_url=cls.url)
    ranked = ok(cls, "/predict", {"inputs": "a sentence"})
    got = client.text_classification("a sentence")
    assert [g.label for g in got] == [r["label"] for r in ranked]
    assert close([g.score for g in got], [r["score"] for r in ranked])
    assert [g.label for g in client.text_classification("a sentence", top_k=1)] == [ranked[0]["label"]]
    logits = ok(cls, "/predict", {"inputs": "a sentence", "raw_scores": True})
    raw = client.text_classification("a sentence", function_to_apply="none")
    assert [g.label for g in raw] == [r["label"] for r in logits]
    assert close([g.score for g in raw], [r["score"] for r in logits])
    sigmoid = client.text_classification("a sentence", function_to_apply="sigmoid")
    assert close([g.score for g in sigmoid], [1 / (1 + np.exp(-r["score"])) for r in logits])
    for params, field in (({"function_to_apply": "tanh"}, "function_to_apply"),
                          ({"top_k": 0}, "top_k"), ([], "parameters")):
        r = requests.post(cls.url + "/", json={"inputs": "a sentence", "parameters": params},
                          timeout=10)
        assert r.status_code == 422 and field in r.text, r.text
    # A TEI body on the same route (no "parameters") keeps /predict's answer.
    assert requests.post(cls.url + "/", json={"inputs": "a sentence"}, timeout=10).json() == ranked


# --- Several models in one server ------------------------------------------------------

def test_every_model_of_a_repository_under_models_name(bertrt_bin, tmp_path):
    """/models/{name}/... serves each model of a repository to TEI and OpenAI clients (the
    client's base URL picks it); the bare routes serve --default-model."""
    import shutil
    from openai import OpenAI
    repo = tmp_path / "repo"
    for name, source in [("mean", "sentence_mean"), ("dense", "st_weightedmean_dense"),
                         ("classifier", "seq_cls")]:
        shutil.copytree(MODELS / source, repo / name / "1")
    s = Server(bertrt_bin, ["--model-repository", str(repo), "--default-model", "dense"], grpc=False)
    try:
        for name, source in [("mean", "sentence_mean"), ("dense", "st_weightedmean_dense")]:
            want = run_outputs(bertrt_bin, str(MODELS / source), ["hello world"])[0]["embedding"]
            got = ok(s, "/embed", {"inputs": "hello world"}, url=f"/models/{name}")[0]
            assert close(got, unit(want)), name
            info = requests.get(f"{s.url}/models/{name}/info", timeout=10).json()
            assert info["model_id"] == name and "embedding" in info["model_type"]
            assert requests.get(f"{s.url}/models/{name}/health", timeout=10).status_code == 200
            client = OpenAI(base_url=f"{s.url}/models/{name}/v1", api_key="unused")
            emb = client.embeddings.create(model="ignored", input=["hello world"]).data[0].embedding
            assert close(emb, want), name
        # The bare routes: the default model.
        assert requests.get(s.url + "/info", timeout=10).json()["model_id"] == "dense"
        labels = ok(s, "/predict", {"inputs": "hello"}, url="/models/classifier")
        assert {p["label"] for p in labels} == {"CLASS_0", "CLASS_1", "CLASS_2"}
        r = requests.post(s.url + "/models/nope/embed", json={"inputs": "a"}, timeout=10)
        assert r.status_code == 404 and "nope" in r.json()["error"], r.text
    finally:
        s.stop()
    bad = subprocess.run([bertrt_bin, "serve", "--model-repository", str(repo), "--default-model",
                          "nope", "--http-port", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--default-model" in bad.stderr, bad.stderr


def test_infinity_client_classify_and_embeddings(started, bertrt_bin, default_model):
    """Infinity's own client (infinity_client from PyPI): /classify answers as /predict ranks
    the labels, with usage; /embeddings with its default dimensions 0 gives the full vector."""
    from infinity_client import Client
    from infinity_client.api.default import classify, embeddings
    from infinity_client.models import ClassifyInput, OpenAIEmbeddingInputText
    cls = started("seq_cls")
    got = classify.sync(client=Client(base_url=cls.url), body=ClassifyInput(input_=["a sentence", "another"]))
    want = ok(cls, "/predict", {"inputs": [["a sentence"], ["another"]]})
    assert [[(o.label, round(o.score, 5)) for o in row] for row in got.data] == \
        [[(o["label"], round(o["score"], 5)) for o in row] for row in want]
    assert got.model == "seq_cls" and got.usage.prompt_tokens > 0
    r = requests.post(cls.url + "/classify", json={"input": []}, timeout=10)
    assert r.status_code == 400 and r.json()["error_type"] == "Empty"
    s = started("default")
    emb = embeddings.sync(client=Client(base_url=s.url), body=OpenAIEmbeddingInputText(input_=["hello world"]))
    want = run_outputs(bertrt_bin, default_model, ["hello world"])[0]["embedding"]
    assert close(emb.data[0].embedding, want)

"""LangChain's embedding wrappers, used as LangChain documents them, against the real
`bertrt serve`: HuggingFaceEndpointEmbeddings (langchain-huggingface; TEI through
huggingface_hub's InferenceClient) and OpenAIEmbeddings (langchain-openai; the OpenAI
route). embed_documents / embed_query and their async forms, on the bare routes and
under /models/{name}, compared with the server's own /embed and with
sentence-transformers' goldens; errors as the clients show them.

The wrappers run in .venv-langchain (scripts/install_deps.sh): langchain-huggingface
needs huggingface_hub 1.x, the rest of the tests huggingface_hub 2.x. Each test runs
tests/server/langchain_client.py with that environment's Python.

OpenAIEmbeddings is made with check_embedding_ctx_length=False, as LangChain documents
for servers other than OpenAI's: with True it tokenizes every text with tiktoken (whose
encodings it downloads on first use) and sends OpenAI's BPE token ids instead of the
text, which no other model's vocabulary reads. The tests run with an empty tiktoken
cache, so a wrapper that still reached for tiktoken would fail here."""
import json
import os
import subprocess

import numpy as np
import pytest
import requests

from conftest import ROOT
from server_util import MODELS, Server, close
from test_repository import add_version

LC_PYTHON = os.environ.get("BERTRT_LANGCHAIN_PYTHON", str(ROOT / ".venv-langchain/bin/python"))
CLIENT = ROOT / "tests/server/langchain_client.py"
GOLDEN = json.loads((ROOT / "tests/data/default_model/golden.json").read_text())
KEY = "lc-test-key"


@pytest.fixture(scope="module")
def langchain(tmp_path_factory):
    """langchain(calls): the answers of langchain_client.py for those calls."""
    if not os.path.exists(LC_PYTHON):
        pytest.fail(f"{LC_PYTHON} not found: run bash scripts/install_deps.sh "
                    "(or set BERTRT_LANGCHAIN_PYTHON)")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING", "OPENAI_", "TIKTOKEN"))}
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("tiktoken"))
    env["HF_HOME"] = str(tmp_path_factory.mktemp("hf_home"))  # no stored token

    def run(calls):
        proc = subprocess.run([LC_PYTHON, str(CLIENT)], input=json.dumps(calls),
                              capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert len(out) == len(calls)
        return out

    return run


def tei(url, **extra):
    return {"wrapper": "tei", "args": {"model": url, **extra}}


def openai(base_url, model="all-MiniLM-L6-v2", api_key="unused", **extra):
    return {"wrapper": "openai", "args": {"model": model, "base_url": base_url, "api_key": api_key,
                                          "check_embedding_ctx_length": False, **extra}}


def call(client, method, value):
    return {**client, "method": method, "input": value}


def vectors(answer):
    assert "vectors" in answer, answer
    return answer["vectors"]


def error(answer, status):
    assert "error" in answer, answer
    assert answer["error"]["status"] == status, answer
    return answer["error"]["message"]


def like_golden(got, want):
    """As tests/cli/test_cli.py holds `bertrt run` to sentence-transformers' output."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    for g, w in zip(got, want):
        assert g @ w / (np.linalg.norm(g) * np.linalg.norm(w)) > 0.99999
        assert np.abs(g - w).max() < 1e-4


@pytest.fixture(scope="module")
def single(bertrt_bin, default_model):
    s = Server(bertrt_bin, [default_model, "--max-client-batch-size", "16"], grpc=False)
    s.model_name = os.path.basename(default_model.rstrip("/"))
    yield s
    s.stop()


def test_wrappers_on_the_bare_routes(single, langchain):
    s = single
    texts, long_text = GOLDEN["texts"][:16], GOLDEN["texts"][16]
    assert len(long_text.split()) > GOLDEN["max_seq_length"]  # cut by sentence-transformers
    served = requests.post(s.url + "/embed", json={"inputs": texts}, timeout=60).json()
    served32 = requests.post(s.url + "/embed", json={"inputs": texts[:4], "dimensions": 32},
                             timeout=60).json()
    hf, oa = tei(s.url), openai(s.url + "/v1")
    answers = langchain([
        call(hf, "embed_documents", texts),
        call(hf, "embed_query", texts[1]),
        call(hf, "aembed_documents", texts[:3]),
        call(hf, "aembed_query", texts[2]),
        # TEI's truncate, through the wrapper's model_kwargs (LangChain passes them on).
        call(tei(s.url, model_kwargs={"truncate": True}), "embed_documents", [long_text]),
        call(hf, "embed_documents", [long_text]),
        call(hf, "embed_documents", texts + texts[:1]),  # over max_client_batch_size
        call(oa, "embed_documents", texts),
        call(oa, "embed_query", texts[1]),
        call(oa, "aembed_documents", texts[:3]),
        call(oa, "aembed_query", texts[2]),
        call(openai(s.url + "/v1", dimensions=32), "embed_documents", texts[:4]),
        call(oa, "embed_documents", texts + texts[:1]),  # the default chunk_size, 1000
        call(oa, "embed_documents", [long_text]),
    ])
    (hf_docs, hf_query, hf_adocs, hf_aquery, hf_cut, hf_long, hf_many,
     oa_docs, oa_query, oa_adocs, oa_aquery, oa_dims, oa_many, oa_long) = answers
    # chunk_size: requests of at most that many texts, which max_client_batch_size holds.
    requests_done = f'bertrt_request_success_total{{model="{s.model_name}",endpoint="/v1/embeddings"}}'
    before = s.metric(requests_done)
    [oa_chunks] = langchain([call(openai(s.url + "/v1", chunk_size=5), "embed_documents",
                                  texts + texts)])
    assert s.metric(requests_done) - before == 7  # 32 texts, 5 a request
    for got in (vectors(hf_docs), vectors(oa_docs), vectors(oa_chunks)[:16], vectors(oa_chunks)[16:]):
        assert close(got, served)
        like_golden(got, GOLDEN["embeddings"][:16])
    for got in (vectors(hf_adocs), vectors(oa_adocs)):
        assert close(got, served[:3])
    for got in (vectors(hf_query), vectors(oa_query)):
        assert close([got], served[1:2])
    for got in (vectors(hf_aquery), vectors(oa_aquery)):
        assert close([got], served[2:3])
    like_golden(vectors(hf_cut), GOLDEN["embeddings"][16:])
    assert close(vectors(oa_dims), served32)
    # Errors: the client raises with bertrt's own message.
    assert "more than the model's 256" in error(hf_long, 422)
    assert "more than the model's 256" in error(oa_long, 422)
    assert "--auto-truncate" in oa_long["error"]["message"]
    for answer in (hf_many, oa_many):
        assert "batch size 17" in error(answer, 413) and "16" in answer["error"]["message"]


def test_openai_wrapper_with_its_default_chunk_size(bertrt_bin, default_model, langchain):
    """OpenAIEmbeddings as LangChain makes it, its chunk_size left at 1,000 texts a request,
    against `bertrt serve` with its own defaults (the per-request cap 2,048): 1,100 texts go
    as two requests and come back in order, as /embed embeds them."""
    s = Server(bertrt_bin, [default_model], grpc=False)
    try:
        name = os.path.basename(default_model.rstrip("/"))
        texts = [f"passage {i}: " + "word " * (i % 7) for i in range(1100)]
        done = f'bertrt_request_success_total{{model="{name}",endpoint="/v1/embeddings"}}'
        before = s.metric(done)
        [answer] = langchain([call(openai(s.url + "/v1"), "embed_documents", texts)])
        assert s.metric(done) - before == 2
        got = vectors(answer)
        assert len(got) == len(texts)
        for at in (0, 999, 1000, 1099):
            want = requests.post(s.url + "/embed", json={"inputs": texts[at]}, timeout=60).json()
            assert close([got[at]], want)
    finally:
        s.stop()


def test_wrappers_under_models_name_with_an_api_key(bertrt_bin, tmp_path, langchain):
    """A repository of two models: a wrapper's base URL (/models/{name}) picks one, the bare
    routes serve --default-model, OpenAIEmbeddings' `model` picks one on the bare route;
    the API key goes where each wrapper puts its token."""
    repo = tmp_path / "repo"
    add_version(repo, "dense", 1, "st_weightedmean_dense")
    add_version(repo, "mean", 1, "sentence_mean")
    golden = json.loads((MODELS / "st_weightedmean_dense/golden.json").read_text())
    # The last text is longer than the model's 48 tokens (cut in the golden): only the
    # TEI wrapper can ask for truncate.
    every = [x["text"] for x in golden["inputs"]]
    want_dense = [x["sentence_embedding"] for x in golden["inputs"]]
    texts = every[:-1]
    s = Server(bertrt_bin, ["--model-repository", str(repo), "--default-model", "mean",
                            "--api-key", KEY], grpc=False)
    try:
        auth = {"Authorization": f"Bearer {KEY}"}

        def served(prefix):
            r = requests.post(s.url + prefix + "/embed", json={"inputs": texts}, headers=auth,
                              timeout=60)
            assert r.status_code == 200, r.text
            return r.json()

        dense, mean = served("/models/dense"), served("/models/mean")
        assert close(served(""), mean)
        answers = langchain([
            call(tei(s.url + "/models/dense", huggingfacehub_api_token=KEY), "embed_documents", texts),
            call(tei(s.url + "/models/dense", huggingfacehub_api_token=KEY,
                     model_kwargs={"truncate": True}), "embed_documents", every),
            # A base URL with the slash, as TEI's own may be written.
            call(tei(s.url + "/models/mean/", huggingfacehub_api_token=KEY), "embed_query", texts[0]),
            call(tei(s.url, huggingfacehub_api_token=KEY), "embed_documents", texts),
            call(openai(s.url + "/models/dense/v1", api_key=KEY), "embed_documents", texts),
            call(openai(s.url + "/v1", model="dense", api_key=KEY), "embed_documents", texts),
            call(openai(s.url + "/v1", model="mean", api_key=KEY), "aembed_query", texts[0]),
            # Errors: a model the server does not have, a wrong key.
            call(openai(s.url + "/v1", model="text-embedding-3-small", api_key=KEY),
                 "embed_query", "x"),
            call(tei(s.url + "/models/nope", huggingfacehub_api_token=KEY), "embed_query", "x"),
            call(tei(s.url, huggingfacehub_api_token="wrong"), "embed_query", "x"),
            call(openai(s.url + "/v1", model="dense", api_key="wrong"), "embed_query", "x"),
        ])
        (hf_dense, hf_cut, hf_mean, hf_bare, oa_dense, oa_named, oa_mean,
         oa_unknown, hf_unknown, hf_key, oa_key) = answers
        for got in (vectors(hf_dense), vectors(oa_dense), vectors(oa_named)):
            assert close(got, dense)
            like_golden(got, want_dense[:-1])
        like_golden(vectors(hf_cut), want_dense)
        assert close([vectors(hf_mean)], mean[:1]) and close([vectors(oa_mean)], mean[:1])
        assert close(vectors(hf_bare), mean)
        message = error(oa_unknown, 404)
        assert "text-embedding-3-small" in message and "dense" in message, message
        assert "nope" in error(hf_unknown, 404)
        assert error(hf_key, 401) and error(oa_key, 401)
        bare = requests.post(s.url + "/embed", json={"inputs": "x"},
                             headers={"Authorization": "Bearer wrong"}, timeout=10).json()
        assert bare["error"] in hf_key["error"]["message"]
        assert bare["error"] in oa_key["error"]["message"]
    finally:
        s.stop()

"""Every tiny test model through the real `bertrt` binary against golden outputs
made by HF transformers / sentence-transformers (scripts/make_goldens.py).

bertrt tokenizes the golden texts itself, so this checks tokenizer, importer
(every head, fp16/bf16, sharded, prefixed names, training junk) and the CPU
runtime together. Tolerance: 1e-4 relative, as the foundation issue asks.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, run_jsonl

MODELS = sorted(p.parent for p in (ROOT / "tests/data/models").glob("*/golden.json"))
# golden name -> bertrt output name
RENAME = {"sentence_embedding": "embedding"}
TOKEN_FIELDS = {"text", "text_pair", "input_ids", "token_type_ids"}


def assert_close(got, want, what):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(np.abs(want).max(), 1e-6)
    err = np.abs(got - want).max() / scale
    assert err <= 1e-4, f"{what}: max error {err:.3g} of the largest magnitude {scale:.3g}"


@pytest.fixture(scope="module", params=MODELS, ids=lambda p: p.name)
def model(request):
    golden = json.loads((request.param / "golden.json").read_text())
    return request.param, golden


def records(golden):
    return [{k: v for k, v in x.items() if k in ("text", "text_pair")} for x in golden["inputs"]]


def test_tokens_match_hf(bertrt_bin, model):
    path, golden = model
    # sentence-transformers truncates to max_seq_length; `bertrt run` does too by
    # default, `bertrt tokenize` (like HF tokenizers) only when asked.
    limit = ["--max-length", str(golden["max_seq_length"])] if "max_seq_length" in golden else []
    _, out, _ = run_jsonl(bertrt_bin, ["tokenize", str(path), *limit], records(golden))
    for got, want in zip(out, golden["inputs"]):
        assert got["input_ids"] == want["input_ids"], want["text"]
        assert got["token_type_ids"] == want["token_type_ids"], want["text"]


@pytest.mark.parametrize("batch_size", [1, 3])
def test_outputs_match_hf(bertrt_bin, model, batch_size):
    path, golden = model
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(path), "--batch-size", str(batch_size)], records(golden))
    assert len(out) == len(golden["inputs"])
    for i, (got, want) in enumerate(zip(out, golden["inputs"])):
        names = [k for k in want if k not in TOKEN_FIELDS and k != "last_hidden_state"]
        assert names, f"golden input {i} has no outputs"
        for name in names:
            assert_close(got[RENAME.get(name, name)], want[name], f"{path.name} input {i} {name}")


HIDDEN_STATE_MODELS = [p for p in MODELS if "last_hidden_state" in (p / "golden.json").read_text()]


@pytest.mark.parametrize("path", HIDDEN_STATE_MODELS, ids=lambda p: p.name)
def test_last_hidden_state_matches_hf(bertrt_bin, path):
    golden = json.loads((path / "golden.json").read_text())
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(path), "--output", "last_hidden_state"], records(golden))
    compared = 0
    for i, (got, want) in enumerate(zip(out, golden["inputs"])):
        if "last_hidden_state" in want:  # long inputs keep only the pooled output, for size
            assert_close(got["last_hidden_state"], want["last_hidden_state"], f"{path.name} input {i}")
            compared += 1
    assert compared > 0

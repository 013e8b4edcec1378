"""Every tiny test model through the real `bertrt` binary against golden outputs
made by HF transformers / sentence-transformers (scripts/make_goldens.py).

bertrt tokenizes the golden texts itself, so this checks tokenizer, importer
(every head, fp16/bf16, sharded, prefixed names, training junk) and the CPU
runtime together. Tolerance: 1e-5 of the largest golden magnitude (the
families issue's bound; the foundation issue asked 1e-4; measured up to 5e-6).
"""
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, have_gpu, run_jsonl

MODELS = sorted(p.parent for p in (ROOT / "tests/data/models").glob("*/golden.json"))
# golden name -> bertrt output name
RENAME = {"sentence_embedding": "embedding"}
TOKEN_FIELDS = {"text", "text_pair", "input_ids", "token_type_ids"}


def dense(value, path):
    """An output as an array: a SPLADE vector ({"indices", "values"}, as
    `bertrt run` writes it and the goldens keep it) vocabulary-wide."""
    if isinstance(value, dict):
        vocab = json.loads((path / "config.json").read_text())["vocab_size"]
        a = np.zeros(vocab)
        a[value["indices"]] = value["values"]
        return a
    return np.asarray(value, dtype=np.float64)


def assert_close(got, want, what, tolerance=1e-5):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(np.abs(want).max(), 1e-6)
    err = np.abs(got - want).max() / scale
    assert err <= tolerance, f"{what}: max error {err:.3g} of the largest magnitude {scale:.3g}"


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
            assert_close(dense(got[RENAME.get(name, name)], path), dense(want[name], path),
                         f"{path.name} input {i} {name}")


PROMPT_MODELS = [p for p in MODELS if "prompt_runs" in (p / "golden.json").read_text()]


@pytest.mark.parametrize("path", PROMPT_MODELS, ids=lambda p: p.name)
def test_prompt_names_match_sentence_transformers(bertrt_bin, path):
    """`bertrt run --prompt-name` against encode(prompt_name=...), each prompt of the model."""
    golden = json.loads((path / "golden.json").read_text())
    for name, want in golden["prompt_runs"].items():
        _, out, _ = run_jsonl(bertrt_bin, ["run", str(path), "--prompt-name", name], records(golden))
        for i, (got, row) in enumerate(zip(out, want)):
            assert_close(got["embedding"], row, f"{path.name} --prompt-name {name} input {i}")
    proc = subprocess.run([str(bertrt_bin), "run", str(path), "--prompt-name", "nope"],
                          input="{\"text\": \"a\"}\n", capture_output=True, text=True)
    assert proc.returncode == 2 and '"nope"' in proc.stderr and '"query"' in proc.stderr, proc.stderr


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


# Outputs compared by cosine in half precision; the rest are scores.
EMBEDDINGS = {"embedding", "pooler_output", "sparse_embedding"}
# Largest |score - golden|: issue 4's 1e-2 for fp16; bf16 keeps 3 fewer
# mantissa bits, so the same computation rounds 8x coarser (measured on the
# H200: up to 0.017 on these goldens with the exact GELU, where fp16 stays
# under 1e-2).
SCORE_TOLERANCE = {"fp16": 1e-2, "bf16": 8e-2}


def assert_matches_golden_in(precision, out, golden, path, what):
    """`bertrt run`'s records against the goldens with issue 4's bounds: fp32
    within 1e-4 relative (the GPU's own fp32 is held to 1e-5 of scale against
    float64 in the parity suite); fp16/bf16 cosine >= 0.9999 per embedding, scores
    within SCORE_TOLERANCE and the same argmax wherever the golden top two
    are more than twice that apart (closer ones no such bound can order)."""
    assert len(out) == len(golden["inputs"])
    for i, (got, want) in enumerate(zip(out, golden["inputs"])):
        for name in [k for k in want if k not in TOKEN_FIELDS and k != "last_hidden_state"]:
            where = f"{what} input {i} {name}"
            g = dense(got[RENAME.get(name, name)], path)
            w = dense(want[name], path)
            if precision == "fp32":
                assert_close(g, w, where, tolerance=1e-4)
            elif RENAME.get(name, name) in EMBEDDINGS:
                g2, w2 = g.reshape(-1, w.shape[-1]), w.reshape(-1, w.shape[-1])
                cos = (g2 * w2).sum(-1) / np.linalg.norm(g2, axis=-1) / np.linalg.norm(w2, axis=-1)
                assert cos.min() >= 0.9999, f"{where}: cosine {cos.min():.6f}"
            else:
                tol = SCORE_TOLERANCE[precision]
                assert g.shape == w.shape, where
                assert np.abs(g - w).max() <= tol, f"{where}: max abs diff {np.abs(g - w).max():.4g}"
                if w.ndim >= 1 and w.shape[-1] > 1:
                    w2, g2 = w.reshape(-1, w.shape[-1]), g.reshape(-1, w.shape[-1])
                    top2 = np.sort(w2, axis=-1)[:, -2:]
                    clear = top2[:, 1] - top2[:, 0] > 2 * tol
                    assert (w2.argmax(-1) == g2.argmax(-1))[clear].all(), f"{where}: argmax differs"


@pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU (runs in scripts/device_cuda.sh)")
@pytest.mark.parametrize("precision,gelu", [("fp32", "exact"), ("fp16", "exact"), ("fp16", "tanh"),
                                            ("bf16", "exact"), ("bf16", "tanh")])
def test_cuda_outputs_match_hf(bertrt_bin, model, precision, gelu):
    """The CUDA engine against the HF goldens (assert_matches_golden_in)."""
    path, golden = model
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(path), "--device", "cuda", "--precision", precision,
                                       "--gelu", gelu, "--batch-size", "3"], records(golden))
    assert_matches_golden_in(precision, out, golden, path, f"{path.name} {precision} --gelu {gelu}")


# A model of each family and of heads whose plan layout differs.
PLAN_FAMILIES = ["seq_cls", "xlmr_qa", "distilbert_token_cls", "mpnet_sentence_mean",
                 "splade_bert", "modernbert_seq_cls", "modernbert_reranker", "modernbert_qa"]


@pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU (runs in scripts/device_cuda.sh)")
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("name", PLAN_FAMILIES)
def test_cuda_plan_of_each_family_matches_hf(bertrt_bin, tmp_path, name, precision):
    """`bertrt build --device cuda` (GEMMs timed into the plan, verified on the
    GPU), then the plan served on the GPU: the goldens' bounds."""
    path = ROOT / "tests/data/models" / name
    golden = json.loads((path / "golden.json").read_text())
    plan = tmp_path / f"{name}.plan"
    proc = subprocess.run([str(bertrt_bin), "build", str(path), "-o", str(plan), "--device", "cuda",
                           "--precision", precision], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "[build] verify done" in proc.stderr, proc.stderr
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(plan), "--device", "cuda", "--precision",
                                       precision, "--batch-size", "3"], records(golden))
    assert_matches_golden_in(precision, out, golden, path, f"{name} plan {precision}")

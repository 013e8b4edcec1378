"""Token classification and question answering through `bertrt run --task` against the
answers of transformers' pipelines on the same models (pipeline_golden.json, made by
scripts/make_pipeline_goldens.py): entities (every aggregation strategy, ignore_labels, long
texts in strided windows) and answers (top_k, windows over long contexts, max_answer_len,
the impossible answer, spans widened to words or not) for BERT, DistilBERT, XLM-R, ModernBERT
and MPNet tokenizers and heads.

Labels, words, offsets and answers must be equal; scores within 1e-5 (conftest's
pipeline_mismatch)."""
import json

import pytest

from conftest import ROOT, have_gpu, pipeline_mismatch as mismatch, run_jsonl

MODELS = sorted(p.parent for p in (ROOT / "tests/data/models").glob("*/pipeline_golden.json"))


def line(golden, case):
    if golden["task"] == "token-classification":
        return {"text": case["text"], "parameters": case["parameters"]}
    return {"question": case["question"], "context": case["context"], "parameters": case["parameters"]}


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_run_task_answers_as_the_pipeline(bertrt_bin, model):
    golden = json.loads((model / "pipeline_golden.json").read_text())
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(model), "--task", golden["task"]],
                          [line(golden, c) for c in golden["cases"]])
    assert len(out) == len(golden["cases"])
    for case, got in zip(golden["cases"], out):
        m = mismatch(got, case["output"])
        assert m is None, f"{model.name} {case['parameters']}: {m}"


@pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU (runs in scripts/device_cuda.sh)")
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_cuda_run_task_answers_as_the_pipeline(bertrt_bin, model):
    """The CUDA engine in fp32: the same entities and answers, scores within 1e-4 (the GPU's
    fp32 logits are within 1e-4 of the goldens', test_goldens.py). fp16 is left out: these
    random models' labels are near ties (probabilities about 1/labels) that fp16's error may
    reorder, and a reordered label regroups entities; the parity suite holds fp16's logits."""
    golden = json.loads((model / "pipeline_golden.json").read_text())
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(model), "--task", golden["task"], "--device", "cuda",
                                       "--precision", "fp32", "--batch-size", "3"],
                          [line(golden, c) for c in golden["cases"]])
    for case, got in zip(golden["cases"], out):
        m = mismatch(got, case["output"], tolerance=1e-4)
        assert m is None, f"{model.name} {case['parameters']}: {m}"


def test_run_task_forms_and_errors(bertrt_bin):
    ner, qa = ROOT / "tests/data/models/token_cls", ROOT / "tests/data/models/qa"
    golden = json.loads((ner / "pipeline_golden.json").read_text())["cases"]
    simple = next(c for c in golden if c["parameters"] == {"aggregation_strategy": "simple"})
    # --parameters for every line; plain text lines; the HF Inference API's body as a line.
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(ner), "--task", "token-classification",
                                       "--parameters", '{"aggregation_strategy": "simple"}',
                                       "--input-format", "text"], [simple["text"]])
    assert mismatch(out[0], simple["output"]) is None
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(ner), "--task", "token-classification"],
                          [{"inputs": [simple["text"]] * 2, "parameters": simple["parameters"]}])
    assert mismatch(out[0], [simple["output"]] * 2) is None
    # A bad line gets an error record and exit code 1; the others still run.
    code, out, _ = run_jsonl(bertrt_bin, ["run", str(ner), "--task", "token-classification"],
                             [{"text": "fine"}, {"text": "x", "parameters": {"aggregation_strategy": "best"}},
                              {"text": "x", "parameters": {"stride": 4}}, {"text": ""}, "not json"],
                             check_exit=1)
    assert isinstance(out[0], list)
    assert "aggregation_strategy" in out[1]["error"] and "simple" in out[1]["error"]
    assert "stride" in out[2]["error"] and "none" in out[2]["error"]
    assert "empty" in out[3]["error"]
    assert "line 5" in out[4]["error"]
    code, out, _ = run_jsonl(bertrt_bin, ["run", str(qa), "--task", "question-answering"],
                             [{"question": "q?", "context": "some context here", "parameters": {"top_k": 0}},
                              {"question": "q?"},
                              {"question": "q?", "context": "c", "parameters": {"doc_stride": 100}},
                              {"question": "q " * 70, "context": "some context here"}], check_exit=1)
    assert "top_k" in out[0]["error"]
    assert "context" in out[1]["error"]
    assert "doc_stride" in out[2]["error"]
    assert "other text" in out[3]["error"]
    # --task must be the model's.
    code, _, err = run_jsonl(bertrt_bin, ["run", str(qa), "--task", "token-classification"], [], check_exit=2)
    assert "--task question-answering" in err
    code, _, err = run_jsonl(bertrt_bin, ["run", str(ROOT / "tests/data/models/seq_cls"), "--task",
                                          "question-answering"], [], check_exit=2)
    assert "leave --task out" in err

"""The scenario bertrt exists for: a Chinese BERT classifier fine-tuned with Google's
run_classifier.py, left as a TensorFlow 1 checkpoint folder (bert_config.json, vocab.txt,
`checkpoint`, model.ckpt-1000.*, with its Adam slots), labels in labels.txt; built into a
plan and served over KServe with text in; the answers equal transformers' on the same
weights (golden.json), and the labels are the file's.

tests/data/models/tf_* are written by TensorFlow's own Saver (scripts/make_tf_checkpoints.py).
"""
import json
import subprocess

import numpy as np
import pytest
import requests

from conftest import ROOT, run_jsonl
from server_util import Server

MODELS = ROOT / "tests/data/models"
TF = MODELS / "tf_seq_cls"
LABELS = ["负面", "正面"]


def golden():
    g = json.loads((TF / "golden.json").read_text())
    return [x["text"] for x in g["inputs"] if "text_pair" not in x], \
        [x["logits"] for x in g["inputs"] if "text_pair" not in x]


def assert_close(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max(), (got, want)


def test_inspect_says_what_it_read_and_skipped(bertrt_bin):
    proc = subprocess.run([bertrt_bin, "inspect", str(TF), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    j = json.loads(proc.stdout)
    assert j["weights_format"] == "TensorFlow checkpoint (model.ckpt-1000)"
    assert j["architecture"] == "BertForSequenceClassification" and j["labels"] == LABELS
    assert j["hidden_act"] == "gelu_new"
    assert "Google BERT's tanh approximation" in proc.stderr
    assert "skipped 83 training-only" in proc.stderr and "adam_m" in proc.stderr


def test_labels_file_that_disagrees_with_the_classifier_is_refused(bertrt_bin, tmp_path):
    import shutil
    d = tmp_path / "m"
    shutil.copytree(TF, d)
    (d / "labels.txt").write_text("a\nb\nc\n")
    proc = subprocess.run([bertrt_bin, "inspect", str(d)], capture_output=True, text=True)
    assert proc.returncode == 3 and "3 labels, but output_weights has 2 rows" in proc.stderr


@pytest.fixture(scope="module")
def served_plan(bertrt_bin, tmp_path_factory):
    plan = tmp_path_factory.mktemp("tf") / "classifier.plan"
    proc = subprocess.run([bertrt_bin, "build", str(TF), "-o", str(plan)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    server = Server(bertrt_bin, [str(plan), "--model-name", "classifier"])
    yield server
    server.stop()


def test_tf1_classifier_built_and_served_over_kserve_answers_as_transformers(served_plan):
    texts, want = golden()
    assert any("中国" in t for t in texts)
    r = served_plan.post("/v2/models/classifier/infer", {"inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}]})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["name"] == "logits" and out["shape"] == [len(texts), 2]
    assert_close(np.reshape(out["data"], (len(texts), 2)), want)


def test_served_labels_are_the_label_files(served_plan):
    import tritonclient.http as httpclient
    texts, want = golden()
    client = httpclient.InferenceServerClient(served_plan.url[len("http://"):])
    text = httpclient.InferInput("text", [len(texts)], "BYTES")
    text.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    got = client.infer("classifier", [text], outputs=[
        httpclient.InferRequestedOutput("logits", class_count=1)]).as_numpy("logits")
    for row, logits in zip(got, want):
        assert row[0].decode().split(":")[2] == LABELS[int(np.argmax(logits))]
    r = requests.post(served_plan.url + "/predict", json={"inputs": texts[0]}, timeout=30)
    assert r.status_code == 200 and r.json()[0]["label"] in LABELS, r.text


def test_plan_from_tf_runs_as_the_plan_from_the_same_weights_in_safetensors(bertrt_bin, tmp_path):
    outs = []
    texts, _ = golden()
    for model in (TF, MODELS / "sharded"):
        plan = tmp_path / f"{model.name}.plan"
        proc = subprocess.run([bertrt_bin, "build", str(model), "-o", str(plan)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append([o["logits"] for o in run_jsonl(bertrt_bin, ["run", str(plan)], [{"text": t} for t in texts])[1]])
    assert outs[0] == outs[1]

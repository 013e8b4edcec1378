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
    notes = "\n".join(j["import_notes"])
    assert "Google BERT's tanh approximation" in notes
    assert "inferred: a sequence-classification head with 2 labels, from output_weights, named by labels.txt" in notes
    assert "mapped: 41 variables from Google BERT's names to transformers' (13 kernels transposed" in notes
    assert "skipped 83 training-only" in notes and "adam_m" in notes


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


def top_labels(server, model, texts):
    """Each text's top class label as tritonclient's classification extension gives it."""
    import tritonclient.http as httpclient
    client = httpclient.InferenceServerClient(server.url[len("http://"):])
    text = httpclient.InferInput("text", [len(texts)], "BYTES")
    text.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    got = client.infer(model, [text], outputs=[
        httpclient.InferRequestedOutput("logits", class_count=1)]).as_numpy("logits")
    return [row[0].decode().split(":")[2] for row in got]


def test_served_labels_are_the_label_files(served_plan):
    texts, want = golden()
    assert top_labels(served_plan, "classifier", texts) == [LABELS[int(np.argmax(w))] for w in want]
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


@pytest.mark.parametrize("name", ["model.ckpt-1000", "model.ckpt-1000.index",
                                  "model.ckpt-1000.data-00000-of-00001"])
def test_checkpoint_named_by_its_prefix_index_or_shard_runs_as_its_folder(bertrt_bin, name):
    texts, want = golden()
    records = [{"text": t} for t in texts]
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(TF / name)], records)
    assert_close([o["logits"] for o in out], want)
    assert [o["label"] for o in out] == [LABELS[int(np.argmax(w))] for w in want]


def test_a_missing_checkpoint_or_a_file_that_is_none_is_a_clear_error(bertrt_bin):
    for path, says in [(TF / "model.ckpt-999", "no such file or directory"),
                       (TF / "vocab.txt", "expected a Hugging Face model folder, a plan file, "
                                          "a .onnx file or a TensorFlow checkpoint (model.ckpt-N); "
                                          f"give the folder that holds it, {TF}")]:
        proc = subprocess.run([bertrt_bin, "run", str(path)], input="", capture_output=True, text=True)
        assert proc.returncode == 3 and says in proc.stderr, proc.stderr


def test_labels_option_names_the_classes_as_a_list_or_a_file(bertrt_bin, tmp_path):
    texts, want = golden()
    names = ["negative", "positive"]
    (tmp_path / "names.txt").write_text("negative\r\npositive\n\n")
    for spec in ("negative,positive", str(tmp_path / "names.txt")):
        _, out, err = run_jsonl(bertrt_bin, ["run", str(TF), "--labels", spec], [{"text": t} for t in texts])
        assert [o["label"] for o in out] == [names[int(np.argmax(w))] for w in want]
        assert "labels: from --labels" in err


@pytest.mark.parametrize("model,spec,says", [
    (TF, "a,b,c", '--labels "a,b,c": 3 labels, but the classifier has 2 outputs'),
    (TF, "a,,b", "an empty label"),
    (MODELS / "sentence_mean", "a,b", "(sentence_embedding) has no classes to name"),
])
def test_labels_that_do_not_fit_the_classifier_are_refused(bertrt_bin, model, spec, says):
    proc = subprocess.run([bertrt_bin, "inspect", str(model), "--labels", spec], capture_output=True, text=True)
    assert proc.returncode == 3 and says in proc.stderr, proc.stderr


def test_plan_built_from_a_prefix_with_labels_keeps_them_and_what_the_import_did(bertrt_bin, tmp_path):
    plan = tmp_path / "c.plan"
    proc = subprocess.run([bertrt_bin, "build", str(TF / "model.ckpt-1000"), "--labels", "neg,pos",
                           "-o", str(plan)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([bertrt_bin, "inspect", str(plan), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    j = json.loads(proc.stdout)
    assert j["labels"] == ["neg", "pos"]
    # The checksum covers the index and the one data shard, nothing else in the folder.
    assert j["plan"]["source_checksum"].endswith("over 2 weights file(s)")
    notes = "\n".join(j["import_notes"])
    assert "mapped: 41 variables" in notes and "skipped 83" in notes and 'labels: from --labels "neg,pos"' in notes
    proc = subprocess.run([bertrt_bin, "inspect", str(plan)], capture_output=True, text=True)
    assert "\nimport            skipped 83 training-only" in proc.stdout
    # A plan carries its tokenizer: --tokenizer has nothing to replace.
    proc = subprocess.run([bertrt_bin, "inspect", str(plan), "--tokenizer", str(TF)], capture_output=True, text=True)
    assert proc.returncode == 3 and "carries its own tokenizer" in proc.stderr


def test_serve_a_checkpoint_prefix_with_labels(bertrt_bin):
    """`serve` takes the same MODEL and --labels; the model is named after its folder."""
    texts, want = golden()
    server = Server(bertrt_bin, [str(TF / "model.ckpt-1000"), "--labels", "neg,pos"])
    try:
        assert top_labels(server, "tf_seq_cls", texts) == [["neg", "pos"][int(np.argmax(w))] for w in want]
    finally:
        server.stop()

"""ONNX exports through the real binary. tests/data/models/onnx_* are made by the real
exporters (scripts/make_onnx_models.py: torch.onnx.export's TorchScript and dynamo
exporters, onnxruntime's int8 quantizer and transformer optimizer); the fp32 ones are
checked against transformers' goldens by tests/models/test_goldens.py. Here: the int8
export against onnxruntime's own int8 outputs, the fused graph refused by op name,
plans equal to those from safetensors, and damaged or hostile files as exit code 3."""
import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run_jsonl

MODELS = ROOT / "tests/data/models"


def inspect(bertrt_bin, path):
    return subprocess.run([bertrt_bin, "inspect", str(path), "--json"], capture_output=True, text=True)


@pytest.mark.parametrize("name,fmt", [
    ("onnx_seq_cls", "ONNX (model.onnx)"),
    ("onnx_dynamo_qa", "ONNX (model.onnx)"),
    ("onnx_optimum_roberta_seq_cls", "ONNX (model.onnx)"),
    ("onnx_int8_seq_cls", "ONNX (model.onnx, 17 int8 tensors dequantized)"),
])
def test_inspect_names_the_weights_format(bertrt_bin, name, fmt):
    proc = inspect(bertrt_bin, MODELS / name)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["weights_format"] == fmt


def test_int8_export_agrees_with_onnxruntimes_int8_output(bertrt_bin):
    """bertrt dequantizes the int8 weights and runs fp32; onnxruntime also quantizes
    the activations. The issue's bound: cosine >= 0.999 against onnxruntime's output."""
    golden = json.loads((MODELS / "seq_cls/golden.json").read_text())
    ort = json.loads((MODELS / "onnx_int8_seq_cls/golden_ort.json").read_text())["outputs"]
    records = [{k: v for k, v in x.items() if k in ("text", "text_pair")} for x in golden["inputs"]]
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(MODELS / "onnx_int8_seq_cls")], records)
    assert len(out) == len(ort)
    for got, want in zip(out, ort):
        a, b = np.array(got["logits"]), np.array(next(iter(want.values())))
        assert np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b) >= 0.999, (a, b)


def test_fused_graph_is_refused_naming_the_op_and_the_fix(bertrt_bin):
    proc = inspect(bertrt_bin, MODELS / "onnx_fused_seq_cls")
    assert proc.returncode == 3
    assert "com.microsoft.SkipLayerNormalization" in proc.stderr and "--optimize O1" in proc.stderr


def test_plan_from_onnx_runs_as_the_plan_from_safetensors(bertrt_bin, tmp_path):
    texts = [{"text": "hello world"}, {"text": "中国人 café", "text_pair": "who"}]
    outs = []
    for name in ("onnx_seq_cls", "seq_cls"):
        plan = tmp_path / f"{name}.plan"
        proc = subprocess.run([bertrt_bin, "build", str(MODELS / name), "-o", str(plan)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(run_jsonl(bertrt_bin, ["run", str(plan)], texts)[1])
    assert outs[0] == outs[1]


CONFIG_FIELDS = ["architecture", "head", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                 "vocab_size", "max_position_embeddings", "type_vocab_size", "hidden_act",
                 "layer_norm_eps", "num_labels", "pad_token_id", "position_offset", "has_pooler"]


@pytest.mark.parametrize("name", ["onnx_seq_cls", "onnx_token_cls", "onnx_dynamo_qa", "onnx_int8_seq_cls",
                                  "onnx_distilbert_seq_cls", "onnx_optimum_roberta_seq_cls"])
def test_bare_onnx_file_infers_its_config_from_the_graph(bertrt_bin, tmp_path, name):
    """A model.onnx alone (no config.json), with --tokenizer: the config the graph implies
    is the exported model's config.json (sizes, heads, activation, eps, head), and the
    outputs are the folder's."""
    shutil.copy(MODELS / name / "model.onnx", tmp_path / "model.onnx")
    bare = [str(tmp_path / "model.onnx"), "--tokenizer", str(MODELS / name)]
    proc = subprocess.run([bertrt_bin, "inspect", *bare, "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = json.loads(inspect(bertrt_bin, MODELS / name).stdout)
    assert {k: got.get(k) for k in CONFIG_FIELDS} == {k: want.get(k) for k in CONFIG_FIELDS}
    assert any(n.startswith("inferred: no config.json, so the config is the ONNX graph's")
               for n in got["import_notes"])
    texts = [{"text": "hello world"}, {"text": "中国人 café", "text_pair": "who"}]
    got_out = run_jsonl(bertrt_bin, ["run", *bare], texts)[1]
    want_out = run_jsonl(bertrt_bin, ["run", str(MODELS / name)], texts)[1]
    for g, w in zip(got_out, want_out):
        g.pop("label", None), w.pop("label", None)  # LABEL_i without config.json's id2label
        assert g == w


def test_bare_onnx_file_without_a_tokenizer_says_how_to_give_one(bertrt_bin, tmp_path):
    shutil.copy(MODELS / "onnx_seq_cls/model.onnx", tmp_path / "model.onnx")
    proc = inspect(bertrt_bin, tmp_path / "model.onnx")
    assert proc.returncode == 3 and "--tokenizer DIR" in proc.stderr, proc.stderr


def test_config_json_that_the_graph_contradicts_is_refused(bertrt_bin, tmp_path):
    """A config.json whose head count is not the graph's would compute wrong outputs."""
    d = tmp_path / "m"
    shutil.copytree(MODELS / "onnx_seq_cls", d)
    config = json.loads((d / "config.json").read_text())
    config["num_attention_heads"] = 2
    (d / "config.json").write_text(json.dumps(config))
    proc = inspect(bertrt_bin, d)
    assert proc.returncode == 3
    assert "2 attention heads, but" in proc.stderr and "splits Q, K and V into 4 heads of width 8" in proc.stderr


def test_inspect_lists_the_matmul_weights_it_named(bertrt_bin):
    notes = json.loads(inspect(bertrt_bin, MODELS / "onnx_seq_cls").stdout)["import_notes"]
    assert "mapped: 12 MatMul/Gemm weights named after the bias added to their output, " \
           "transposed from [in, out]" in notes


def onnx_tensor_with_external_data(location):
    """A ModelProto (hand-encoded protobuf) whose one initializer lives in `location`."""
    def field(number, wire, payload):
        key = bytes([number << 3 | wire])
        if wire == 2:
            return key + varint(len(payload)) + payload
        return key + payload

    def varint(n):
        out = b""
        while True:
            b = n & 0x7F
            n >>= 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def entry(k, v):
        return field(1, 2, k.encode()) + field(2, 2, v.encode())

    tensor = (field(1, 0, varint(4)) + field(2, 0, varint(1)) + field(8, 2, b"bert.x.weight") +
              field(13, 2, entry("location", location)) + field(13, 2, entry("offset", "0")) +
              field(13, 2, entry("length", "16")) + field(14, 0, varint(1)))
    graph = field(5, 2, tensor)
    return field(1, 0, varint(8)) + field(7, 2, graph)


@pytest.mark.parametrize("location", ["../../../etc/passwd", "/etc/passwd", ".."])
def test_external_data_outside_the_model_folder_is_refused(bertrt_bin, tmp_path, location):
    d = tmp_path / "m"
    shutil.copytree(MODELS / "seq_cls", d)
    (d / "model.safetensors").unlink()
    (d / "model.onnx").write_bytes(onnx_tensor_with_external_data(location))
    proc = inspect(bertrt_bin, d)
    assert proc.returncode == 3 and "is not a plain file name beside the model" in proc.stderr, proc.stderr


def test_truncated_onnx_is_an_error(bertrt_bin, tmp_path):
    data = (MODELS / "onnx_seq_cls/model.onnx").read_bytes()
    for cut in (1, 1000, len(data) // 2, len(data) - 1):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(MODELS / "onnx_seq_cls", d)
        (d / "model.onnx").write_bytes(data[:cut])
        proc = inspect(bertrt_bin, d)
        assert proc.returncode == 3, (cut, proc.stderr)

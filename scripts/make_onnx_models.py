#!/usr/bin/env python3
"""Write the ONNX test models (tests/data/models/onnx_*) with the real exporters.

  python3 scripts/make_onnx_models.py OUT_DIR [NAME ...]   # needs torch, transformers, onnx, onnxruntime

Each fixture is a tiny test model of tests/data/models exported as users export them:
torch.onnx.export (TorchScript exporter, opset 14, the `onnx::MatMul_N` weights; and the
dynamo exporter, opset 18; a DistilBERT), a sentence-transformers transformer with its
weights in an external data file, optimum's export (a RoBERTa; optimum-onnx pins
transformers < 4.58, so scripts/device_onnx_fixtures.sh puts that release on PYTHONPATH
for it), onnxruntime's dynamic int8 quantization (MatMulInteger) and onnxruntime's
transformer optimizer (fused com.microsoft ops). The weights are the
source's, so its golden.json is the fixture's (fp32 exports); the int8 export gets
golden_ort.json, onnxruntime's own outputs on the golden inputs' token ids.
report.json says what each exporter did.
"""
import inspect
import json
import os
import shutil
import sys
import traceback

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "data", "models")
report = {"torch": torch.__version__, "transformers": transformers.__version__}


def copy_model(src_name, dst):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(os.path.join(MODELS, src_name), dst,
                    ignore=shutil.ignore_patterns("*.safetensors", "*.safetensors.index.json"))


def load(src_name, cls):
    model = getattr(transformers, cls).from_pretrained(os.path.join(MODELS, src_name),
                                                       attn_implementation="eager")
    return model.eval()


def export(model, path, dynamo, opset, external=False):
    ids = torch.tensor([[2, 40, 41, 42, 3]])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    accepted = inspect.signature(model.forward).parameters
    inputs = {k: v for k, v in inputs.items() if k in accepted}  # DistilBERT takes no token types
    names = list(inputs)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    options = dict(input_names=names, opset_version=opset, dynamic_axes=axes, dynamo=dynamo)
    if dynamo:
        options["external_data"] = external
    with torch.no_grad():
        # By keyword: BertModel.forward's third positional parameter is not token_type_ids
        # in every transformers version.
        torch.onnx.export(model, (), path, kwargs=inputs, **options)
    if external and not dynamo:
        import onnx
        m = onnx.load(path)
        onnx.save_model(m, path, save_as_external_data=True, location="model.onnx_data",
                        size_threshold=0)


def ort_outputs(path, golden):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in sess.get_inputs()}
    out = []
    for x in golden["inputs"]:
        ids = np.array([x["input_ids"]], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.array([x["token_type_ids"]], dtype=np.int64)}
        res = sess.run(None, {k: v for k, v in feed.items() if k in wanted})
        out.append({o.name: r[0].tolist() for o, r in zip(sess.get_outputs(), res)})
    return out


def attempt(name, fn, only=()):
    if only and name not in only:
        return
    try:
        fn()
        report[name] = "ok"
        print("wrote", name)
    except Exception as e:  # noqa: BLE001 - the report says which exporter failed and why
        report[name] = "failed: " + "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]
        print(name, report[name])


def main():
    out = sys.argv[1]
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)

    def plain(name, src, cls, dynamo, opset, external=False):
        dst = os.path.join(out, name)
        copy_model(src, dst)
        export(load(src, cls), os.path.join(dst, "model.onnx"), dynamo, opset, external)
        golden = json.load(open(os.path.join(dst, "golden.json")))
        # The export itself, checked against transformers' goldens before it is kept.
        got = ort_outputs(os.path.join(dst, "model.onnx"), golden)
        key = "logits" if "logits" in got[0] else next(iter(got[0]))
        for g, want in zip(got, golden["inputs"]):
            if key in want:
                assert np.allclose(g[key], want[key], atol=1e-4), (name, key)
        return dst

    attempt("onnx_seq_cls", lambda: plain("onnx_seq_cls", "seq_cls", "BertForSequenceClassification", False, 14), only)
    attempt("onnx_dynamo_qa", lambda: plain("onnx_dynamo_qa", "qa", "BertForQuestionAnswering", True, 18), only)
    attempt("onnx_token_cls", lambda: plain("onnx_token_cls", "token_cls", "BertForTokenClassification", False, 17), only)
    attempt("onnx_external_sentence",
            lambda: plain("onnx_external_sentence", "sentence_mean", "BertModel", True, 18, external=True), only)

    attempt("onnx_distilbert_seq_cls",
            lambda: plain("onnx_distilbert_seq_cls", "distilbert_seq_cls", "DistilBertForSequenceClassification",
                          False, 17), only)

    def optimum_export():
        import optimum.exporters.onnx
        from importlib.metadata import version
        src = os.path.join(MODELS, "roberta_seq_cls")
        dst = os.path.join(out, "onnx_optimum_roberta_seq_cls")
        shutil.rmtree(dst, ignore_errors=True)
        # What `optimum-cli export onnx --model DIR --task text-classification DST` runs;
        # it validates the export against the PyTorch model itself.
        optimum.exporters.onnx.main_export(src, dst, task="text-classification")
        shutil.copy(os.path.join(src, "golden.json"), dst)
        golden = json.load(open(os.path.join(dst, "golden.json")))
        for g, want in zip(ort_outputs(os.path.join(dst, "model.onnx"), golden), golden["inputs"]):
            assert np.allclose(g["logits"], want["logits"], atol=1e-4)
        report["optimum"] = "optimum " + version("optimum") + ", optimum-onnx " + version("optimum-onnx") + \
            ", transformers " + transformers.__version__
        report["onnx_optimum_roberta_seq_cls_files"] = sorted(os.listdir(dst))
    attempt("onnx_optimum_roberta_seq_cls", optimum_export, only)

    def int8():
        from onnxruntime.quantization import QuantType, quantize_dynamic
        src = os.path.join(out, "onnx_seq_cls")
        dst = os.path.join(out, "onnx_int8_seq_cls")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        os.remove(os.path.join(dst, "model.onnx"))
        quantize_dynamic(os.path.join(src, "model.onnx"), os.path.join(dst, "model.onnx"),
                         weight_type=QuantType.QInt8)
        golden = json.load(open(os.path.join(dst, "golden.json")))
        with open(os.path.join(dst, "golden_ort.json"), "w") as f:
            json.dump({"made_by": "onnxruntime " + __import__("onnxruntime").__version__ +
                       " on model.onnx (quantize_dynamic, QInt8)",
                       "outputs": ort_outputs(os.path.join(dst, "model.onnx"), golden)}, f)
    attempt("onnx_int8_seq_cls", int8, only)

    def fused():
        from onnxruntime.transformers import optimizer
        src = os.path.join(out, "onnx_seq_cls")
        dst = os.path.join(out, "onnx_fused_seq_cls")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        m = optimizer.optimize_model(os.path.join(src, "model.onnx"), model_type="bert",
                                     num_heads=4, hidden_size=32, opt_level=2)
        m.save_model_to_file(os.path.join(dst, "model.onnx"))
        report["onnx_fused_seq_cls_ops"] = sorted({n.op_type for n in m.model.graph.node})
    attempt("onnx_fused_seq_cls", fused, only)

    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

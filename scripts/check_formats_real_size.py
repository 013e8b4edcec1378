#!/usr/bin/env python3
"""The checkpoint formats at a real size: one random BERT-base classifier (768 x 12 layers,
transformers' initialization) saved by the real tools in each format bertrt reads, each
run by bertrt on the CPU and on the GPU and compared with the same weights read from
safetensors (an importer copies, it does not compute: on the CPU the answers must be the
very same; on the GPU too, but for the engine's own run-to-run freedom: it times
cuBLASLt's candidate algorithms at start and keeps the fastest, so two processes may
round an fp32 GEMM differently, by about 1e-6 of the scale, whatever the weights'
format) and with transformers' fp32 logits; the int8 ONNX export against onnxruntime's.

  python3 scripts/check_formats_real_size.py --bertrt BIN --out DIR   # torch, transformers, onnx, onnxruntime

Writes DIR/formats_real_size.json and prints a table. Exit code 1 when a check fails.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import transformers

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "bertrt serves fine-tuned BERT models fast and safely in production.",
    "Can you tell me which way is north? I think it is left of the big red house.",
    "short",
    " ".join(["every good boy does fine and then some more words follow"] * 20),
    "A checkpoint from TensorFlow, PyTorch or ONNX should give the same answers as safetensors.",
    "中国人 café résumé naïve",
    "what is the answer to the question that was asked in the meeting on tuesday afternoon",
]


def bertrt_run(binary, path, device):
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in TEXTS)
    proc = subprocess.run([binary, "run", path, "--device", device, "--precision", "fp32"],
                          input=stdin, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"bertrt run {path} --device {device}: {proc.stderr[-2000:]}")
    return np.array([json.loads(line)["logits"] for line in proc.stdout.splitlines()])


def token_ids(binary, path):
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in TEXTS)
    proc = subprocess.run([binary, "tokenize", path, "--max-length", "512"], input=stdin,
                          capture_output=True, text=True, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/formats_real_size")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    src = os.path.join(args.work, "safetensors")
    subprocess.run([sys.executable, os.path.join(here, "make_random_model.py"), "--preset", "bert-base",
                    "--head", "seq-cls", "--num-labels", "3", "--act", "gelu", "--seed", "7", "-o", src],
                   check=True)
    model = transformers.BertForSequenceClassification.from_pretrained(src, attn_implementation="eager").eval()
    sd = model.state_dict()

    def variant(name, write):
        d = os.path.join(args.work, name)
        shutil.copytree(src, d, ignore=shutil.ignore_patterns("*.safetensors", "*.safetensors.index.json"))
        write(d)
        return d

    dirs = {
        "pytorch_model.bin (zip)": variant("bin_zip", lambda d: torch.save(sd, os.path.join(d, "pytorch_model.bin"))),
        "pytorch_model.bin (legacy)": variant("bin_legacy", lambda d: torch.save(
            sd, os.path.join(d, "pytorch_model.bin"), _use_new_zipfile_serialization=False)),
    }

    def onnx_export(d):
        ids = torch.tensor([[101, 2000, 2001, 102]])
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
        axes = {n: {0: "batch", 1: "sequence"} for n in inputs}
        with torch.no_grad():
            torch.onnx.export(model, (), os.path.join(d, "model.onnx"), kwargs=inputs, input_names=list(inputs),
                              dynamic_axes=axes, opset_version=14, dynamo=False)
    dirs["ONNX"] = variant("onnx", onnx_export)

    def onnx_int8(d):
        from onnxruntime.quantization import QuantType, quantize_dynamic
        quantize_dynamic(os.path.join(dirs["ONNX"], "model.onnx"), os.path.join(d, "model.onnx"),
                         weight_type=QuantType.QInt8)
    int8_dir = variant("onnx_int8", onnx_int8)

    toks = token_ids(args.bertrt, src)
    with torch.no_grad():
        reference = np.array([model(input_ids=torch.tensor([t["input_ids"]]),
                                    token_type_ids=torch.tensor([t["token_type_ids"]])).logits[0].numpy()
                              for t in toks], dtype=np.float64)
    scale = np.abs(reference).max()
    rows, ok = [], True
    for device in ("cpu", "cuda"):
        base = bertrt_run(args.bertrt, src, device)
        for fmt, d in dirs.items():
            got = bertrt_run(args.bertrt, d, device)
            same = bool(np.array_equal(got, base))
            vs_base = float(np.abs(got - base).max() / scale)
            err = float(np.abs(got - reference).max() / scale)
            bound = 1e-5 if device == "cpu" else 1e-3  # the GPU's fp32 GEMMs may use TF32
            passed = (same or (device == "cuda" and vs_base <= 1e-5)) and err <= bound
            ok &= passed
            rows.append({"format": fmt, "device": device, "identical_to_safetensors": same,
                         "max_diff_vs_safetensors_of_scale": vs_base,
                         "max_err_vs_transformers_of_scale": err, "bound": bound, "pass": passed})
        import onnxruntime as ort
        sess = ort.InferenceSession(os.path.join(int8_dir, "model.onnx"), providers=["CPUExecutionProvider"])
        ort_out = np.array([sess.run(None, {"input_ids": np.array([t["input_ids"]]),
                                             "attention_mask": np.ones((1, len(t["input_ids"])), dtype=np.int64),
                                             "token_type_ids": np.array([t["token_type_ids"]])})[0][0]
                            for t in toks])
        got = bertrt_run(args.bertrt, int8_dir, device)
        cos = float(min(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(got, ort_out)))
        passed = cos >= 0.999
        ok &= passed
        rows.append({"format": "ONNX int8 (quantize_dynamic)", "device": device, "min_cosine_vs_onnxruntime_int8": cos,
                     "bound": 0.999, "pass": passed})
    report = {"model": "random BERT-base classifier (768 x 12, 3 labels), transformers " + transformers.__version__ +
              ", torch " + torch.__version__, "texts": len(TEXTS), "rows": rows, "pass": ok}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "formats_real_size.json"), "w") as f:
        json.dump(report, f, indent=2)
    print("| format | device | answers vs safetensors' | max error vs transformers / scale | pass |")
    print("|---|---|---|---:|---|")
    for r in rows:
        if "identical_to_safetensors" in r:
            vs = "identical" if r["identical_to_safetensors"] else \
                f"differ by {r['max_diff_vs_safetensors_of_scale']:.1e} of the scale"
            print(f"| {r['format']} | {r['device']} | {vs} | "
                  f"{r['max_err_vs_transformers_of_scale']:.2e} (bound {r['bound']:g}) | {'yes' if r['pass'] else 'NO'} |")
        else:
            print(f"| {r['format']} | {r['device']} | cosine vs onnxruntime int8 {r['min_cosine_vs_onnxruntime_int8']:.6f} "
                  f"(bound 0.999) | | {'yes' if r['pass'] else 'NO'} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

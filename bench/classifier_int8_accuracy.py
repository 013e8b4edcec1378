#!/usr/bin/env python3
"""8-bit accuracy on a trained classifier: bertrt's CPU int8 (each calibration
method), fp8 (the CPU's emulation of the GPU's FP8 GEMMs) and bf16 against its own fp32 and against the labels, with ONNX
Runtime's dynamic int8 of the same weights as the anchor, on held-out texts.

The classifier and its data come from bench/trained_classifier.py (Debian
package descriptions -> archive section, all-MiniLM-L6-v2 fine-tuned). int8
is calibrated on the first --calibrate-samples texts of train.jsonl (every
fifth held out for bertrt's own report and budget); the table is measured on
test.jsonl, which neither calibration nor training saw.

    python bench/classifier_int8_accuracy.py --bertrt build-cpu/bertrt --data /tmp/debcls

Needs numpy, onnx and onnxruntime (as bench/cpu_int8_bench.py). Prints a table
and appends it to bench/RESULTS.md.
"""
import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_int8_bench import ROOT, cpu_name, encoder_graph, read_safetensors, session  # noqa: E402


def read_jsonl(path):
    return [json.loads(l) for l in Path(path).read_text(encoding="utf-8").splitlines() if l]


def bertrt_logits(bertrt, model, test_file, extra, threads):
    """[texts, labels] logits from `bertrt run ... --output-npy`, and its stderr."""
    with tempfile.NamedTemporaryFile(suffix=".npy") as out:
        p = subprocess.run([bertrt, "run", model, str(test_file), "--threads", str(threads),
                            "--output-npy", out.name, "--quiet", *extra], capture_output=True,
                           timeout=3600)
        if p.returncode != 0:
            sys.exit(f"bertrt run {' '.join(extra)} failed: {p.stderr.decode()}")
        return np.load(out.name).astype(np.float64), p.stderr.decode()


def ort_logits(sess, model_dir, encodings):
    """The classifier head (BERT's pooler: tanh(W h_cls + b), then the classifier) over ORT's
    last_hidden_state, one text at a time (no padding)."""
    w = read_safetensors(Path(model_dir) / "model.safetensors")
    rows = []
    for e in encodings:
        ids = np.array([e["input_ids"]], np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.array([e["token_type_ids"]], np.int64)}
        cls = sess.run(None, feed)[0][0, 0].astype(np.float64)
        pooled = np.tanh(w["bert.pooler.dense.weight"] @ cls + w["bert.pooler.dense.bias"])
        rows.append(w["classifier.weight"] @ pooled + w["classifier.bias"])
    return np.array(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--data", required=True, help="bench/trained_classifier.py's --out folder")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calibrate-samples", type=int, default=500)
    ap.add_argument("--results", default=str(ROOT / "bench" / "RESULTS.md"))
    args = ap.parse_args()
    data = Path(args.data)
    model = str(data / "model")
    config = json.loads((data / "model" / "config.json").read_text())
    label2id = config["label2id"]
    test = read_jsonl(data / "test.jsonl")
    labels = np.array([label2id[r["label"]] for r in test])
    work = Path(tempfile.mkdtemp(prefix="bertrt-cls-int8-"))
    test_file = work / "test.jsonl"
    test_file.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in test))
    calib = work / "calibrate.jsonl"
    calib.write_text("".join(json.dumps({"text": r["text"]}) + "\n"
                             for r in read_jsonl(data / "train.jsonl")[:args.calibrate_samples]))

    fp32, _ = bertrt_logits(args.bertrt, model, test_file, ["--precision", "fp32"], args.threads)
    variants = {"bertrt bf16": ["--precision", "bf16"]}
    for method in ("token", "max", "p99.99", "mse"):
        variants[f"bertrt int8 ({method})"] = ["--precision", "int8", "--calibrate", str(calib),
                                              "--calibration", method]
    # fp8 as the GPU's FP8 GEMMs compute it, emulated on the CPU (the same numbers).
    variants["bertrt fp8 (max, CPU emulation)"] = ["--precision", "fp8", "--calibrate", str(calib)]
    results, reports = {}, {}
    for name, extra in variants.items():
        results[name], stderr = bertrt_logits(args.bertrt, model, test_file, extra, args.threads)
        reports[name] = [l.strip() for l in stderr.splitlines() if l.strip()]
        print(f"{name}: done", flush=True)

    # ONNX Runtime: the same encoder in fp32 (checked against bertrt's fp32) and its dynamic int8.
    graph, _ = encoder_graph(model)
    fp32_path, int8_path = work / "encoder.onnx", work / "encoder.int8.onnx"
    onnx.save(graph, fp32_path)
    quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8)
    enc = subprocess.run([args.bertrt, "tokenize", model], input=test_file.read_bytes(),
                         capture_output=True, timeout=600)
    encodings = [json.loads(l) for l in enc.stdout.decode().splitlines()]
    ort32 = ort_logits(session(fp32_path, args.threads), model, encodings)
    worst = np.abs(ort32 - fp32).max()
    if worst > 1e-3:
        sys.exit(f"the ONNX graph disagrees with bertrt fp32 (max logit difference {worst:.2e})")
    results["ONNX Runtime int8 (dynamic)"] = ort_logits(session(int8_path, args.threads), model,
                                                        encodings)

    pytorch = json.loads((data / "pytorch_test_accuracy.json").read_text())["test_accuracy"]
    ref_arg = fp32.argmax(1)
    table = ["| variant | test accuracy | argmax agreement with its fp32 | max logit error | mean logit error |",
             "|---|---:|---:|---:|---:|",
             f"| PyTorch fp32 (the trainer's evaluation) | {pytorch:.4f} | | | |",
             f"| bertrt fp32 | {(ref_arg == labels).mean():.4f} | 1 | 0 | 0 |"]
    for name, logits in results.items():
        err = np.abs(logits - fp32)
        table.append(f"| {name} | {(logits.argmax(1) == labels).mean():.4f} | "
                     f"{(logits.argmax(1) == ref_arg).mean():.4f} | {err.max():.4f} | {err.mean():.5f} |")
    print("\n".join(table))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report_lines = []
    for name, lines in reports.items():
        report_lines += [f"- {name}: " + "; ".join(l for l in lines if "GEMMs" in l or "argmax" in l)
                         ] if any("GEMMs" in l for l in lines) else []
    section = [f"\n## 8 bits on a trained classifier (issue 46), {stamp}, {platform.node()}\n",
               f"`python {' '.join(sys.argv)}` on {cpu_name()}, {args.threads} threads. Model: "
               f"all-MiniLM-L6-v2 fine-tuned on Debian package descriptions -> section "
               f"({len(label2id)} classes; bench/trained_classifier.py), {len(test)} test texts "
               f"that neither training nor calibration saw; int8 calibrated on "
               f"{args.calibrate_samples} training texts; ONNX Runtime's anchor is the same "
               f"encoder (bench/cpu_int8_bench.py's graph, checked against bertrt fp32 to "
               f"{worst:.1e}) through quantize_dynamic, with the pooler and classifier in float64.\n",
               *table, "", "bertrt's reports at load:", *report_lines, ""]
    with open(args.results, "a", encoding="utf-8") as f:
        f.write("\n".join(section))


if __name__ == "__main__":
    main()

"""CPU int8 and bf16 benchmark: bertrt's int8 and bf16 GEMMs against its fp32, with ONNX Runtime's fp32 and its
dynamic int8 quantization (its transformer optimizer, then quantize_dynamic: MatMulInteger,
per-tensor dynamic activation scales) as the anchor, all in one run on the same CPU and
thread count.

Speed: `bertrt bench` (engine in-process, random ids, median ms) and ONNX Runtime's
session.run on the same shapes, the variants interleaved over REPEATS rounds. Accuracy: each
int8 (and bertrt's bf16) against its own fp32 on real texts (tests/data/tokenizer/corpus.jsonl, tokenized by
`bertrt tokenize`), the sequence embedding (mean pooling, as the model's sentence-transformers
config pools) compared by cosine. The ONNX graph is the BERT encoder written here with onnx's
helper from the model's safetensors (post-norm, erf GELU; no exporter needed), checked against
bertrt's fp32 before anything is timed.

    python bench/cpu_int8_bench.py --bertrt build-cpu/bertrt --model models/all-MiniLM-L6-v2 \
        [--model DIR ...] [--threads 2] [--cases 1x128,8x128,32x128] [--repeats 3]

Needs numpy, onnx and onnxruntime (a venv: python3 -m venv v && v/bin/pip install onnx
onnxruntime numpy). Prints a table and appends it to bench/RESULTS.md.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers import optimizer

ROOT = Path(__file__).resolve().parent.parent


def read_safetensors(path):
    """name -> float32 array (the format: 8-byte header length, JSON header, raw data)."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    dtypes = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in ("F32", "F16", "BF16"):
            continue  # position_ids and other integer buffers
        begin, end = info["data_offsets"]
        buf = raw[8 + n + begin:8 + n + end]
        if info["dtype"] == "BF16":
            a = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(buf, dtypes[info["dtype"]]).astype(np.float32)
        out[name] = a.reshape(info["shape"])
    return out


def encoder_graph(model_dir):
    """The BERT encoder as an ONNX graph: ids, mask, types [B, S] -> last_hidden_state."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    w = read_safetensors(Path(model_dir) / "model.safetensors")
    prefix = "bert." if any(k.startswith("bert.") for k in w) else ""
    h, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg.get("layer_norm_eps", 1e-12)
    d = h // heads
    inits, nodes, names = [], [], set()

    def const(name, value):  # each name once (a scalar reused by every layer)
        if name not in names:
            names.add(name)
            inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(x, name):  # x W^T + b
        wt = const(name + ".wT", w[prefix + name + ".weight"].T.copy())
        return node("Add", [node("MatMul", [x, wt]), const(name + ".b", w[prefix + name + ".bias"])])

    def layer_norm(x, name):
        return node("LayerNormalization", [x, const(name + ".g", w[prefix + name + ".weight"]),
                                           const(name + ".be", w[prefix + name + ".bias"])],
                    axis=-1, epsilon=eps)

    e = "embeddings."
    seq_len = node("Gather", [node("Shape", ["input_ids"]), const("one", np.array(1, np.int64))])
    positions = node("Range", [const("zero", np.array(0, np.int64)), seq_len, "one"])
    x = node("Add", [node("Gather", [const("word", w[prefix + e + "word_embeddings.weight"]), "input_ids"]),
                     node("Gather", [const("pos", w[prefix + e + "position_embeddings.weight"]), positions])])
    x = node("Add", [x, node("Gather", [const("type", w[prefix + e + "token_type_embeddings.weight"]),
                                        "token_type_ids"])])
    x = layer_norm(x, e + "LayerNorm")
    # (1 - mask) * -1e4 as [B, 1, 1, S]
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const("onef", np.array(1.0, np.float32)), mask]),
                        const("neg", np.array(-1e4, np.float32))])
    bias = node("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))])
    split_shape = const("split", np.array([0, 0, heads, d], np.int64))
    merge_shape = const("merge", np.array([0, 0, h], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(d), np.float32))
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def heads_of(t):
            return node("Transpose", [node("Reshape", [t, split_shape])], perm=[0, 2, 1, 3])

        q = heads_of(linear(x, p + "attention.self.query"))
        k = heads_of(linear(x, p + "attention.self.key"))
        v = heads_of(linear(x, p + "attention.self.value"))
        scores = node("Add", [node("Mul", [node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])]),
                                           scale]), bias])
        ctx = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3]), merge_shape])
        x = layer_norm(node("Add", [linear(ctx, p + "attention.output.dense"), x]),
                       p + "attention.output.LayerNorm")
        inter = linear(x, p + "intermediate.dense")
        # erf GELU: 0.5 x (1 + erf(x / sqrt 2))
        gelu = node("Mul", [node("Mul", [inter, const("half", np.array(0.5, np.float32))]),
                            node("Add", [const("onef2", np.array(1.0, np.float32)),
                                         node("Erf", [node("Div", [inter, const("sqrt2", np.array(np.sqrt(2.0), np.float32))])])])])
        x = layer_norm(node("Add", [linear(gelu, p + "output.dense"), x]), p + "output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    io = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
          for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", h])]
    graph = helper.make_graph(nodes, "bert_encoder", io, out, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), cfg


def session(path, threads):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])


def mean_pool(hidden, mask):
    m = mask[..., None].astype(np.float64)
    return (hidden * m).sum(1) / m.sum(1)


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def ort_embed(sess, encodings):
    """Mean-pooled last_hidden_state of each encoding, one at a time (no padding)."""
    rows = []
    for e in encodings:
        ids = np.array([e["input_ids"]], np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.array([e["token_type_ids"]], np.int64)}
        rows.append(mean_pool(sess.run(None, feed)[0], feed["attention_mask"])[0])
    return np.array(rows)


def bertrt_embed(bertrt, model, texts, precision, threads):
    """bertrt's pooled vectors (last_hidden_state mean-pooled, as for ORT) and its stderr."""
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    p = subprocess.run([bertrt, "run", model, "--precision", precision, "--threads", str(threads),
                        "--output", "last_hidden_state"], input=stdin.encode(), capture_output=True,
                       timeout=1200)
    if p.returncode != 0:
        sys.exit(f"bertrt run failed: {p.stderr.decode()}")
    rows = []
    for line in p.stdout.decode().splitlines():
        hidden = np.array(json.loads(line)["last_hidden_state"])
        rows.append(hidden.mean(0))
    return np.array(rows), p.stderr.decode()


def bertrt_ms(bertrt, model, precision, batch, seq, threads, iterations):
    p = subprocess.run([bertrt, "bench", model, "--precision", precision, "--threads", str(threads),
                        "--batch-size", str(batch), "--seq-len", str(seq), "--iterations",
                        str(iterations), "--warmup", "3", "--json"], capture_output=True,
                       timeout=1200)
    if p.returncode != 0:
        sys.exit(f"bertrt bench failed: {p.stderr.decode()}")
    return json.loads(p.stdout)["median_ms"]


def ort_ms(sess, vocab, batch, seq, iterations):
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, vocab, size=(batch, seq), dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    for _ in range(3):
        sess.run(None, feed)
    ms = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        sess.run(None, feed)
        ms.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ms)


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default="1x128,8x128,32x128")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--texts", type=int, default=64, help="corpus texts for the accuracy columns")
    ap.add_argument("--results", default=str(ROOT / "bench" / "RESULTS.md"))
    args = ap.parse_args()
    corpus = [json.loads(l)["text"] for l in
              (ROOT / "tests/data/tokenizer/corpus.jsonl").read_text(encoding="utf-8").split("\n") if l]
    texts = [t for t in corpus if t.strip()][:args.texts]
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",")]
    rows, fusions = [], []
    work = Path(tempfile.mkdtemp(prefix="bertrt-int8-"))
    for model in args.model:
        name = Path(model).name
        graph, cfg = encoder_graph(model)
        raw_path = work / f"{name}.raw.onnx"
        fp32_path, int8_path = work / f"{name}.onnx", work / f"{name}.int8.onnx"
        onnx.save(graph, raw_path)
        # ONNX Runtime's documented BERT path: its transformer optimizer (fused attention,
        # LayerNorm, GELU where it finds them), then dynamic quantization.
        optimized = optimizer.optimize_model(str(raw_path), model_type="bert",
                                             num_heads=cfg["num_attention_heads"],
                                             hidden_size=cfg["hidden_size"], opt_level=0)
        optimized.save_model_to_file(str(fp32_path))
        fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
        print(f"{name}: onnxruntime's optimizer fused {fused}", flush=True)
        fusions.append(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(fused.items())))
        # (The optimizer's fused ops have no shape inference: their outputs are fp32.)
        quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})
        sessions = {"ort fp32": session(fp32_path, args.threads), "ort int8": session(int8_path, args.threads)}
        # Accuracy on real texts, and the graph checked against bertrt's fp32.
        enc = subprocess.run([args.bertrt, "tokenize", model], input="".join(
            json.dumps({"text": t}) + "\n" for t in texts).encode(), capture_output=True, timeout=600)
        encodings = [json.loads(l) for l in enc.stdout.decode().splitlines()]
        ort32, ort8 = ort_embed(sessions["ort fp32"], encodings), ort_embed(sessions["ort int8"], encodings)
        ours32, _ = bertrt_embed(args.bertrt, model, texts, "fp32", args.threads)
        ours8, report = bertrt_embed(args.bertrt, model, texts, "int8", args.threads)
        ours16, _ = bertrt_embed(args.bertrt, model, texts, "bf16", args.threads)
        check = cosines(ort32, ours32).min()
        if check < 0.99999:
            sys.exit(f"{name}: the ONNX graph disagrees with bertrt fp32 (cosine {check:.6f})")
        acc = {"bertrt": cosines(ours8, ours32), "ort": cosines(ort8, ort32),
               "bf16": cosines(ours16, ours32)}
        summary = [l.strip() for l in report.splitlines() if "int8 GEMMs" in l or "cosine" in l]
        for batch, seq in cases:
            times = {k: [] for k in ("bertrt fp32", "bertrt int8", "bertrt bf16", "ort fp32", "ort int8")}
            for r in range(args.repeats):
                order = list(times)
                order = order[r % len(order):] + order[:r % len(order)]
                for k in order:
                    if k.startswith("bertrt"):
                        times[k].append(bertrt_ms(args.bertrt, model, k.split()[1], batch, seq,
                                                  args.threads, args.iterations))
                    else:
                        times[k].append(ort_ms(sessions[k], cfg["vocab_size"], batch, seq, args.iterations))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append((name, batch, seq, med, acc, summary))
            print(f"{name} b{batch} s{seq}: " + "  ".join(f"{k} {v:.2f} ms" for k, v in med.items()), flush=True)
    table = ["| model | batch x seq | bertrt fp32 ms | bertrt int8 ms | int8 speed-up | bertrt bf16 ms | bf16 speed-up | ORT fp32 ms | ORT int8 ms | ORT int8 speed-up | bertrt int8 / ORT int8 time | cosine vs own fp32: bertrt int8 mean / min | bertrt bf16 mean / min | ORT int8 mean / min |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for name, batch, seq, m, acc, _ in rows:
        b, o, h = acc["bertrt"], acc["ort"], acc["bf16"]
        table.append(f"| {name} | {batch}x{seq} | {m['bertrt fp32']:.2f} | {m['bertrt int8']:.2f} | "
                     f"{m['bertrt fp32'] / m['bertrt int8']:.2f}x | {m['bertrt bf16']:.2f} | "
                     f"{m['bertrt fp32'] / m['bertrt bf16']:.2f}x | {m['ort fp32']:.2f} | {m['ort int8']:.2f} | "
                     f"{m['ort fp32'] / m['ort int8']:.2f}x | {m['bertrt int8'] / m['ort int8']:.2f} | "
                     f"{b.mean():.5f} / {b.min():.5f} | {h.mean():.6f} / {h.min():.6f} | {o.mean():.5f} / {o.min():.5f} |")
    reports = sorted({f"- {name}: " + "; ".join(s) for name, _, _, _, _, s in rows})
    print("\n".join(table))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = [f"\n## CPU int8 and bf16 against fp32 and ONNX Runtime's dynamic int8, {stamp}, {platform.node()}\n",
               f"`python {' '.join(sys.argv)}` on {cpu_name()}, {args.threads} threads, onnxruntime "
               f"{ort.__version__}; medians of {args.repeats} interleaved rounds of {args.iterations} runs "
               f"(engine only, random ids); accuracy on {len(texts)} corpus texts, each int8 (and bf16) against its own "
               f"fp32 (mean-pooled last_hidden_state); onnxruntime's optimizer fused "
               f"{'; '.join(sorted(set(fusions)))}\n", *table, "", "bertrt's report at load (built-in corpus, every fifth held out):", *reports, ""]
    with open(args.results, "a", encoding="utf-8") as f:
        f.write("\n".join(section))


if __name__ == "__main__":
    main()

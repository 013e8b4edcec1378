"""CPU benchmark: bertrt against ONNX Runtime and PyTorch, in one run.

BERT-base size (random weights), BertForSequenceClassification, fp32, seq 128,
batch 1 and 8, the same thread count for all three (and the process pinned to
that many cores where taskset works). Prints a table and appends it to
bench/RESULTS.md with the machine, the command, the date and the versions.

    python bench/cpu_bench.py --threads 2 [--bertrt build/bertrt] [--iterations 20]

Needs torch, transformers, onnx and onnxruntime (the anchors) and numpy.
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

root = Path(__file__).resolve().parent.parent


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def time_fn(fn, warmup, iterations):
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ms)


def random_inputs(batch, seq, vocab, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, vocab, size=(batch, seq), dtype=np.int64)
    return ids, np.ones_like(ids), np.zeros_like(ids)


def bench_torch(model_dir, cases, threads, warmup, iterations):
    import torch
    from transformers import BertForSequenceClassification
    torch.set_num_threads(threads)
    model = BertForSequenceClassification.from_pretrained(model_dir, attn_implementation="sdpa")
    model.eval()
    out = {}
    for batch, seq in cases:
        ids, mask, types = (torch.from_numpy(a) for a in random_inputs(batch, seq, model.config.vocab_size, 0))
        with torch.inference_mode():
            out[(batch, seq)] = time_fn(
                lambda: model(input_ids=ids, attention_mask=mask, token_type_ids=types),
                warmup, iterations)
    return out, torch.__version__


def export_onnx(model_dir, path):
    import torch
    from transformers import BertForSequenceClassification
    model = BertForSequenceClassification.from_pretrained(model_dir, attn_implementation="eager")
    model.eval()
    ids = torch.ones(1, 16, dtype=torch.long)
    kwargs = dict(
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["logits"],
        dynamic_axes={n: {0: "batch", 1: "seq"} for n in ["input_ids", "attention_mask", "token_type_ids"]},
        opset_version=17,
    )
    try:
        torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), path, dynamo=False, **kwargs)
    except TypeError:  # torch versions without the dynamo argument
        torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), path, **kwargs)


def bench_ort(onnx_path, vocab, cases, threads, warmup, iterations):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    out = {}
    for batch, seq in cases:
        ids, mask, types = random_inputs(batch, seq, vocab, 0)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        out[(batch, seq)] = time_fn(lambda: sess.run(None, feed), warmup, iterations)
    return out, ort.__version__


def bench_bertrt(binary, model_dir, cases, threads, warmup, iterations):
    out = {}
    for batch, seq in cases:
        cmd = [binary, "bench", model_dir, "--threads", str(threads), "--batch-size", str(batch),
               "--seq-len", str(seq), "--iterations", str(iterations), "--warmup", str(warmup), "--json"]
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        out[(batch, seq)] = res["median_ms"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bertrt", default=str(root / "build/bertrt"))
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--workdir", default=None, help="where the random model is written (default: a temp dir)")
    ap.add_argument("--results", default=str(root / "bench/RESULTS.md"))
    ap.add_argument("--label", default="", help="a note for the results table, e.g. the machine's name")
    args = ap.parse_args()

    cases = [(int(b), args.seq_len) for b in args.batches.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bertrt-cpu-bench-"))
    model_dir = work / "bert-base-seqcls"
    if not (model_dir / "model.safetensors").exists():
        subprocess.run([sys.executable, str(root / "scripts/make_random_model.py"), "--preset", "bert-base",
                        "--head", "seq-cls", "--num-labels", "2", "-o", str(model_dir)], check=True)
    onnx_path = work / "bert-base-seqcls.onnx"
    if not onnx_path.exists():
        export_onnx(str(model_dir), str(onnx_path))
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]

    print(f"[cpu-bench] {cpu_model()}, {args.threads} threads; timing bertrt, ONNX Runtime, PyTorch", flush=True)
    ours = bench_bertrt(args.bertrt, str(model_dir), cases, args.threads, args.warmup, args.iterations)
    ort_ms, ort_version = bench_ort(str(onnx_path), vocab, cases, args.threads, args.warmup, args.iterations)
    torch_ms, torch_version = bench_torch(str(model_dir), cases, args.threads, args.warmup, args.iterations)

    rows = []
    header = "| batch | seq | bertrt ms | ONNX Runtime ms | PyTorch ms | vs ORT | vs PyTorch |"
    rows.append(header)
    rows.append("|---|---|---|---|---|---|---|")
    for case in cases:
        rows.append(f"| {case[0]} | {case[1]} | {ours[case]:.1f} | {ort_ms[case]:.1f} | {torch_ms[case]:.1f} | "
                    f"{ort_ms[case] / ours[case]:.2f}x | {torch_ms[case] / ours[case]:.2f}x |")
    table = "\n".join(rows)
    print(table)

    cmd = "python bench/cpu_bench.py " + " ".join(sys.argv[1:])
    section = (
        f"\n## CPU engine vs ONNX Runtime and PyTorch — BERT-base fp32 {args.label}\n\n"
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}\n"
        f"- machine: {cpu_model()}, {os.cpu_count()} cores visible, {args.threads} threads for every engine\n"
        f"- command: `{cmd}`\n"
        f"- anchors measured in the same run: onnxruntime {ort_version} (ORT_ENABLE_ALL, "
        f"intra_op {args.threads}), torch {torch_version} (SDPA, inference_mode)\n"
        f"- BertForSequenceClassification, random weights, median of {args.iterations} runs after "
        f"{args.warmup} warm-up; ratios are their time over bertrt's (higher is better for bertrt)\n\n"
        f"{table}\n")
    with open(args.results, "a") as f:
        f.write(section)
    print(f"[cpu-bench] appended to {args.results}")


if __name__ == "__main__":
    main()

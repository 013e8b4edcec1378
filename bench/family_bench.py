#!/usr/bin/env python3
"""bertrt against PyTorch on the model families beyond BERT, in one run on the GPU machine.

Models: XLM-RoBERTa-base (250,002-token vocabulary, 514 positions, the
classification head) and DistilBERT-base (6 layers), sequence classification,
and SPLADE on BERT-base (BertForMaskedLM: the masked-LM head over the 30,522-entry
vocabulary on every token, then log(1 + relu) max-pooled; PyTorch computes the
same from its logits), random weights saved by transformers in fp16. Anchors as bench/cuda_bench.py:
transformers fp16 with SDPA, token ids already on the GPU, CUDA-event timing,
median; eager at batch 1 and 128, torch.compile at batch 128 when time is left.
bertrt: `bertrt bench --device cuda --precision fp16 --json` (ids in host memory
to logits in host memory, both copies included). Seq 128.

Prints a table and appends it to RESULTS.md (--results) with the date, machine
and commands.

  python3 bench/family_bench.py --bertrt .carry/bin/bertrt --results $OUT/RESULTS.md
"""
import argparse
import datetime
import os
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import cuda_bench  # noqa: E402  (its bertrt runner and CUDA-event timer)

FAMILIES = {
    # tokenizer: a test model's (bench draws random ids; loading wants one).
    "xlm-roberta-base": dict(cls="XLMRobertaForSequenceClassification", config="XLMRobertaConfig",
                             tokenizer="xlmr_qa",
                             kw=dict(vocab_size=250002, max_position_embeddings=514,
                                     type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)),
    "distilbert-base": dict(cls="DistilBertForSequenceClassification", config="DistilBertConfig",
                            tokenizer="distilbert_qa",
                            kw=dict(vocab_size=30522)),
    # Batch 32, not 128: each sequence's vector is vocabulary-wide.
    "splade-bert-base": dict(cls="BertForMaskedLM", config="BertConfig", tokenizer="splade_bert",
                             kw=dict(vocab_size=30522), batches=(1, 32), splade=True),
}


def make_model(name, workdir):
    import torch
    import transformers
    path = os.path.join(workdir, name)
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    spec = FAMILIES[name]
    config = getattr(transformers, spec["config"])(num_labels=2, **spec["kw"])
    torch.manual_seed(0)
    model = getattr(transformers, spec["cls"])(config).half()
    model.save_pretrained(path, safe_serialization=True)
    tokenizer = os.path.join(ROOT, "tests", "data", "models", spec["tokenizer"])
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer, f), path)
    return path


def time_torch(model_dir, name, batch, compile_model, vocab):
    import torch
    import transformers
    model = getattr(transformers, FAMILIES[name]["cls"]).from_pretrained(
        model_dir, dtype=torch.float16, attn_implementation="sdpa").cuda().eval()
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(1000, vocab, (batch, 128), device="cuda", generator=g)
    fn = torch.compile(model, dynamic=False) if compile_model else model
    if FAMILIES[name].get("splade"):
        def run():
            return torch.log1p(torch.relu(fn(input_ids=ids).logits)).amax(dim=1)
    else:
        def run():
            return fn(input_ids=ids).logits
    ms, _ = cuda_bench.time_cuda(torch, run,
                                 5 if compile_model else 10, 30 if compile_model else 50)
    del model, fn
    torch.cuda.empty_cache()
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--workdir", default="/tmp/bertrt-family-bench")
    ap.add_argument("--results", help="append the section to this Markdown file")
    ap.add_argument("--deadline-s", type=float, default=240.0)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rows, commands, notes, device = [], [], [], ""
    for name, spec in FAMILIES.items():
        path = make_model(name, args.workdir)
        vocab = spec["kw"]["vocab_size"]
        batches = spec.get("batches", (1, 128))
        for b in batches:
            r = cuda_bench.run_bertrt(args.bertrt, path, b, seq_len=128)
            device = r.get("device", device)
            commands.append(r["command"])
            rows.append((name, b, "bertrt fp16", r["median_ms"]))
            cuda_bench.log(f"{name} b{b} bertrt: {r['median_ms']:.3f} ms")
            ms = time_torch(path, name, b, False, vocab)
            rows.append((name, b, "PyTorch eager fp16", ms))
            cuda_bench.log(f"{name} b{b} PyTorch eager: {ms:.3f} ms")
        if cuda_bench.elapsed() < args.deadline_s - 90:
            t0 = time.monotonic()
            ms = time_torch(path, name, batches[-1], True, vocab)
            rows.append((name, batches[-1], "torch.compile fp16", ms))
            cuda_bench.log(f"{name} b{batches[-1]} torch.compile: {ms:.3f} ms "
                           f"({time.monotonic() - t0:.0f} s)")
        else:
            notes.append(f"{name}: torch.compile skipped, out of time")

    mine = {(m, b): ms for m, b, s, ms in rows if s == "bertrt fp16"}
    lines = ["| model | batch | system | median ms | seq/s | bertrt faster by |",
             "|---|---:|---|---:|---:|---:|"]
    for m, b, system, ms in rows:
        ratio = "" if system == "bertrt fp16" else f"{ms / mine[(m, b)]:.2f}x"
        lines.append(f"| {m} s128 | {b} | {system} | {ms:.3f} | {b * 1000 / ms:,.0f} | {ratio} |")
    table = "\n".join(lines)
    print(table)
    if args.results:
        with open(args.results, "a") as f:
            f.write(f"\n## Families beyond BERT against PyTorch, {datetime.date.today()}\n\n"
                    f"Machine: {device}. Command: `python3 bench/family_bench.py --bertrt "
                    f"{args.bertrt}`; bertrt runs: `{commands[0]}` and the same for each model "
                    f"and batch. PyTorch {__import__('torch').__version__}, transformers "
                    f"{__import__('transformers').__version__}, random fp16 weights, "
                    f"seq 128.\n\n{table}\n")
            for n in notes:
                f.write(f"\n{n}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

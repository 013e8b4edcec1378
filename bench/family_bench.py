#!/usr/bin/env python3
"""bertrt against PyTorch on the model families beyond BERT, in one run on the GPU machine.

Models: XLM-RoBERTa-base (250,002-token vocabulary, 514 positions, the
classification head), DistilBERT-base (6 layers) and MPNet-base
(all-mpnet-base-v2's shape, its relative position bias), sequence classification,
and SPLADE on BERT-base (BertForMaskedLM: the masked-LM head over the 30,522-entry
vocabulary on every token, then log(1 + relu) max-pooled; PyTorch computes the
same from its logits), all at seq 128; ModernBERT-base (ModernBertConfig's
defaults: 22 layers, 1152-wide gated FFN, 50,368-token vocabulary, 8,192
positions, a window of 128 in two layers of three) sequence classification at
seq 1,024 and 8,192. Random weights saved by transformers in fp16. Anchors as
bench/cuda_bench.py: transformers fp16 with SDPA (MPNet: eager, which is all
transformers has for it), token ids already on the GPU,
CUDA-event timing, median; eager at each family's shapes (batch 1 and 128 at
seq 128; SPLADE batch 1 and 32; ModernBERT batch 8), torch.compile at the
largest (ModernBERT: seq 1,024, then 8,192) when time is left. ModernBERT in
PyTorch is what users get without flash-attn (flash_attention_2 is not
installed on the GPU machine): SDPA, where transformers applies the local
layers' window as a dense [seq, seq] mask, so that its attention is quadratic
in every layer. bertrt: `bertrt bench --device cuda --precision fp16 --json`
(ids in host memory to logits in host memory, both copies included). At 8,192
tokens both sides time 10 calls after 3 (elsewhere 50 after 10; compiled 30
after 5), so that the run fits --deadline-s (about 300 s in all).

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
    # shapes: the (batch, seq_len) pairs timed (default batch 1 and 128 at
    # seq 128); compile: those torch.compile is timed at too, in order while
    # time is left (default the last of shapes).
    "xlm-roberta-base": dict(cls="XLMRobertaForSequenceClassification", config="XLMRobertaConfig",
                             tokenizer="xlmr_qa",
                             kw=dict(vocab_size=250002, max_position_embeddings=514,
                                     type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)),
    "distilbert-base": dict(cls="DistilBertForSequenceClassification", config="DistilBertConfig",
                            tokenizer="distilbert_qa",
                            kw=dict(vocab_size=30522)),
    # all-mpnet-base-v2's shape: MPNet's relative position bias in attention.
    # transformers' MPNet has no SDPA path: its eager attention.
    "mpnet-base": dict(cls="MPNetForSequenceClassification", config="MPNetConfig",
                       tokenizer="mpnet_seq_cls", kw=dict(vocab_size=30527), attn="eager"),
    # Batch 32, not 128: each sequence's vector is vocabulary-wide.
    "splade-bert-base": dict(cls="BertForMaskedLM", config="BertConfig", tokenizer="splade_bert",
                             kw=dict(vocab_size=30522), shapes=((1, 128), (32, 128)),
                             splade=True),
    # Long inputs, its reason to exist: 1,024 and all 8,192 positions.
    "modernbert-base": dict(cls="ModernBertForSequenceClassification", config="ModernBertConfig",
                            tokenizer="modernbert_seq_cls", kw=dict(vocab_size=50368),
                            shapes=((8, 1024), (8, 8192)), compile=((8, 1024), (8, 8192))),
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


def calls(seq_len, compiled=False):
    """(warm-up, timed) calls: fewer past 1,024 tokens, where a ModernBERT
    forward of batch 8 takes a few hundred ms in PyTorch."""
    if seq_len > 1024:
        return 3, 10
    return (5, 30) if compiled else (10, 50)


def time_torch(model_dir, name, batch, seq_len, compile_model, vocab):
    import torch
    import transformers
    model = getattr(transformers, FAMILIES[name]["cls"]).from_pretrained(
        model_dir, dtype=torch.float16,
        attn_implementation=FAMILIES[name].get("attn", "sdpa")).cuda().eval()
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(1000, vocab, (batch, seq_len), device="cuda", generator=g)
    if compile_model:
        torch._dynamo.reset()  # the previous compiled graphs (and their memory) dropped
    fn = torch.compile(model, dynamic=False) if compile_model else model
    if FAMILIES[name].get("splade"):
        def run():
            return torch.log1p(torch.relu(fn(input_ids=ids).logits)).amax(dim=1)
    else:
        def run():
            return fn(input_ids=ids).logits
    ms, _ = cuda_bench.time_cuda(torch, run, *calls(seq_len, compile_model))
    del model, fn
    torch.cuda.empty_cache()
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--workdir", default="/tmp/bertrt-family-bench")
    ap.add_argument("--results", help="append the section to this Markdown file")
    ap.add_argument("--deadline-s", type=float, default=300.0,
                    help="a torch.compile step starts only while 90 s of this are left")
    ap.add_argument("--only", help="comma-separated models (default: all of " +
                    ", ".join(FAMILIES) + ")")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    names = args.only.split(",") if args.only else list(FAMILIES)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}")
    rows, commands, notes, device = [], [], [], ""
    for name in names:
        spec = FAMILIES[name]
        path = make_model(name, args.workdir)
        vocab = spec["kw"]["vocab_size"]
        shapes = spec.get("shapes", ((1, 128), (128, 128)))
        for b, seq in shapes:
            warmup, iterations = calls(seq)
            r = cuda_bench.run_bertrt(args.bertrt, path, b, seq_len=seq, iterations=iterations,
                                      warmup=warmup)
            device = r.get("device", device)
            commands.append(r["command"])
            rows.append((name, b, seq, "bertrt fp16", r["median_ms"]))
            cuda_bench.log(f"{name} s{seq} b{b} bertrt: {r['median_ms']:.3f} ms")
            ms = time_torch(path, name, b, seq, False, vocab)
            rows.append((name, b, seq, "PyTorch eager fp16", ms))
            cuda_bench.log(f"{name} s{seq} b{b} PyTorch eager: {ms:.3f} ms")
        for b, seq in spec.get("compile", shapes[-1:]):
            if cuda_bench.elapsed() < args.deadline_s - 90:
                t0 = time.monotonic()
                ms = time_torch(path, name, b, seq, True, vocab)
                rows.append((name, b, seq, "torch.compile fp16", ms))
                cuda_bench.log(f"{name} s{seq} b{b} torch.compile: {ms:.3f} ms "
                               f"({time.monotonic() - t0:.0f} s)")
            else:
                notes.append(f"{name} s{seq} b{b}: torch.compile skipped, out of time")

    mine = {(m, b, seq): ms for m, b, seq, s, ms in rows if s == "bertrt fp16"}
    lines = ["| model | batch | system | median ms | seq/s | bertrt faster by |",
             "|---|---:|---|---:|---:|---:|"]
    for m, b, seq, system, ms in rows:
        ratio = "" if system == "bertrt fp16" else f"{ms / mine[(m, b, seq)]:.2f}x"
        lines.append(f"| {m} s{seq} | {b} | {system} | {ms:.3f} | {b * 1000 / ms:,.0f} | "
                     f"{ratio} |")
    table = "\n".join(lines)
    print(table)
    if args.results:
        with open(args.results, "a") as f:
            f.write(f"\n## Families beyond BERT against PyTorch, {datetime.date.today()}\n\n"
                    f"Machine: {device}. Command: `python3 bench/family_bench.py --bertrt "
                    f"{args.bertrt}`; bertrt runs: `{commands[0]}` and the same for each model, "
                    f"batch and length. PyTorch {__import__('torch').__version__}, transformers "
                    f"{__import__('transformers').__version__}, random fp16 weights, "
                    f"SDPA (MPNet: eager, transformers has no SDPA for it), seq length in the "
                    f"model column; ModernBERT's local layers "
                    f"take their window as a dense mask in PyTorch (no flash-attn).\n\n"
                    f"{table}\n")
            for n in notes:
                f.write(f"\n{n}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

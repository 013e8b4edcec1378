#!/usr/bin/env python3
"""A TensorFlow 1 checkpoint at a real size, on the CPU: a random Chinese BERT-base
classifier (768 x 12 layers, bert-base-chinese's 21,128-token vocabulary size, 3 labels,
N(0, 0.02) weights as Google's initializer draws them) written by TensorFlow's own Saver
with Google's names and run_classifier.py's Adam slots (scripts/make_tf_checkpoints.py:
1,200+ index entries, many SSTable blocks), and the same weights as a transformers
safetensors folder. bertrt runs both (and the checkpoint named by its prefix, labels from
--labels) on Chinese and English texts up to 512 tokens; the answers must be the very
same as from safetensors (an importer copies, it does not compute), and within 1e-5 of
the scale of a float64 numpy forward written here from Google's variables (no transformers
and no bertrt code in the reference: it checks the name mapping and the transposes).

  /tmp/tfenv/bin/python scripts/check_tf_real_size.py --bertrt BIN --out DIR   # tensorflow-cpu, safetensors

Writes DIR/tf_real_size.json and prints a table. Exit code 1 when a check fails.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tf_checkpoints  # noqa: E402

H, LAYERS, HEADS, FFN, VOCAB, POSITIONS, LABELS = 768, 12, 12, 3072, 21128, 512, ["负面", "中性", "正面"]
TEXTS = [
    "这家餐厅的菜很好吃，服务也很周到，我们下次还会再来。",
    "快递太慢了，等了一个星期才到，而且包装也破了。",
    "今天天气不错。",
    "The quick brown fox jumps over the lazy dog.",
    "中国人 café résumé naïve 北京 2026 年",
    "产品质量一般，价格偏高，客服态度还可以，总体来说中规中矩。" * 12,  # ~400 tokens
    "好" * 600,  # cut at 512 tokens
    "bertrt 读取 TensorFlow 的检查点，不需要 TensorFlow。",
]


def vocab():
    """bert-base-chinese's layout: specials, [unused], punctuation and ASCII, CJK characters
    one token each, then ## pieces, to its 21,128 tokens."""
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [chr(c) for c in range(33, 127)] + ["é", "ï"]
    tokens += ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "caf", "##e", "##é", "na", "##ive",
               "res", "##ume", "be", "##rt", "##rt", "tensor", "##flow", "2026"]
    cjk = 0x4E00
    while len(tokens) < 14000:
        tokens.append(chr(cjk))
        cjk += 1
    while len(tokens) < VOCAB:
        tokens.append("##" + chr(cjk - 7000 + len(tokens) % 6000))
    seen, out = set(), []
    for t in tokens:  # keep the first of any repeat, then pad to the size
        if t not in seen:
            seen.add(t)
            out.append(t)
    while len(out) < VOCAB:
        out.append(f"[unused{len(out)}]")
    return out


def hf_weights(rng):
    def n(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)
    w = {"bert.embeddings.word_embeddings.weight": n(VOCAB, H),
         "bert.embeddings.position_embeddings.weight": n(POSITIONS, H),
         "bert.embeddings.token_type_embeddings.weight": n(2, H),
         "bert.embeddings.LayerNorm.weight": 1 + n(H), "bert.embeddings.LayerNorm.bias": n(H),
         "bert.pooler.dense.weight": n(H, H), "bert.pooler.dense.bias": n(H),
         "classifier.weight": n(len(LABELS), H), "classifier.bias": n(len(LABELS))}
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}."
        for name, (rows, cols) in {"attention.self.query": (H, H), "attention.self.key": (H, H),
                                   "attention.self.value": (H, H), "attention.output.dense": (H, H),
                                   "intermediate.dense": (FFN, H), "output.dense": (H, FFN)}.items():
            w[p + name + ".weight"], w[p + name + ".bias"] = n(rows, cols), n(rows)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"], w[p + ln + ".bias"] = 1 + n(H), n(H)
    return w


def reference_logits(tf_dir, ids, types):
    """Google's BERT forward in float64, from the checkpoint's variables as TensorFlow reads them."""
    import tensorflow as tf
    r = tf.train.load_checkpoint(os.path.join(tf_dir, "model.ckpt-1000"))
    g = lambda name: r.get_tensor(name).astype(np.float64)  # noqa: E731

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * g(p + "/gamma") + g(p + "/beta")

    def dense(x, p):  # kernels are [in, out]
        return x @ g(p + "/kernel") + g(p + "/bias")

    def gelu(x):  # modeling.py's: the tanh form
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    n = len(ids)
    x = g("bert/embeddings/word_embeddings")[ids] + g("bert/embeddings/position_embeddings")[:n] + \
        g("bert/embeddings/token_type_embeddings")[types]
    x = ln(x, "bert/embeddings/LayerNorm")
    d = H // HEADS
    for i in range(LAYERS):
        p = f"bert/encoder/layer_{i}"
        q, k, v = (dense(x, f"{p}/attention/self/{m}").reshape(n, HEADS, d).transpose(1, 0, 2)
                   for m in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = (s / s.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(n, H)
        x = ln(x + dense(ctx, f"{p}/attention/output/dense"), f"{p}/attention/output/LayerNorm")
        x = ln(x + dense(gelu(dense(x, f"{p}/intermediate/dense")), f"{p}/output/dense"), f"{p}/output/LayerNorm")
    pooled = np.tanh(dense(x[:1], "bert/pooler/dense"))
    return (pooled @ g("output_weights").T + g("output_bias"))[0]


def bertrt(binary, args, texts):
    stdin = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
    start = time.perf_counter()
    proc = subprocess.run([binary, *args], input=stdin.encode(), capture_output=True)
    if proc.returncode:
        sys.exit(f"bertrt {' '.join(args)}: exit {proc.returncode}\n{proc.stderr.decode()}")
    return [json.loads(line) for line in proc.stdout.decode().splitlines()], time.perf_counter() - start, \
        proc.stderr.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bertrt", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    hf = os.path.join(args.out, "hf")
    os.makedirs(hf, exist_ok=True)
    rng = np.random.default_rng(2026)
    save_file(hf_weights(rng), os.path.join(hf, "model.safetensors"))
    with open(os.path.join(hf, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab()) + "\n")
    config = {"model_type": "bert", "architectures": ["BertForSequenceClassification"], "vocab_size": VOCAB,
              "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "intermediate_size": FFN, "max_position_embeddings": POSITIONS, "type_vocab_size": 2,
              "hidden_act": "gelu_new", "layer_norm_eps": 1e-12,
              "id2label": {str(i): label for i, label in enumerate(LABELS)}}
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(config, f, ensure_ascii=False)
    make_tf_checkpoints.tf.compat.v1.disable_eager_execution()
    tf_dir = make_tf_checkpoints.make(args.out, "tf", os.path.abspath(hf), junk=True)
    index_bytes = os.path.getsize(os.path.join(tf_dir, "model.ckpt-1000.index"))

    run = ["run", "--max-length", "512", "--device", "cpu"]
    want, t_st, _ = bertrt(args.bertrt, run[:1] + [hf] + run[1:], TEXTS)
    got_dir, t_tf, notices = bertrt(args.bertrt, run[:1] + [tf_dir, "--labels", ",".join(LABELS)] + run[1:], TEXTS)
    got_prefix, _, _ = bertrt(args.bertrt, run[:1] + [os.path.join(tf_dir, "model.ckpt-1000"),
                                                     "--labels", ",".join(LABELS)] + run[1:], TEXTS)
    tokens, _, _ = bertrt(args.bertrt, ["tokenize", hf, "--max-length", "512"], TEXTS)
    rows, ok = [], True
    for i, text in enumerate(TEXTS):
        ref = reference_logits(tf_dir, tokens[i]["input_ids"], tokens[i]["token_type_ids"])
        a = np.array(got_dir[i]["logits"])
        rel = float(np.abs(a - ref).max() / np.abs(ref).max())
        same = got_dir[i] == want[i] == got_prefix[i]
        ok &= same and rel <= 1e-5
        rows.append({"text": text[:24], "tokens": len(tokens[i]["input_ids"]), "same_as_safetensors": same,
                     "rel_diff_vs_float64": rel, "label": got_dir[i]["label"]})
    report = {"model": f"random BERT-base classifier ({H} x {LAYERS}, vocab {VOCAB}, {len(LABELS)} labels), "
                       "TensorFlow " + make_tf_checkpoints.tf.__version__ + " Saver with Adam slots",
              "index_bytes": index_bytes, "skipped_notice": [n for n in notices.splitlines() if "skipped" in n][:1],
              "run_seconds": {"safetensors": round(t_st, 2), "tf_checkpoint": round(t_tf, 2)},
              "rows": rows, "pass": bool(ok)}
    with open(os.path.join(args.out, "tf_real_size.json"), "w") as f:
        json.dump(report, f, indent=2, ensure_ascii=False)
    print(f"{'text':26} {'tokens':>6} {'same as safetensors':>20} {'rel diff vs float64':>20}  label")
    for r in rows:
        print(f"{r['text']:26} {r['tokens']:6d} {str(r['same_as_safetensors']):>20} "
              f"{r['rel_diff_vs_float64']:20.3g}  {r['label']}")
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, ensure_ascii=False))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write the TensorFlow 1 checkpoint test models (tests/data/models/tf_*) with TensorFlow itself.

  python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu safetensors
  /tmp/tfenv/bin/python scripts/make_tf_checkpoints.py [OUT_DIR]

Each fixture is a folder as Google's BERT scripts leave it after fine-tuning
(run_classifier.py, run_squad.py, the common NER scripts): bert_config.json, vocab.txt,
`checkpoint`, model.ckpt-<step>.{index,data-00000-of-00001,meta}, written by
tf.compat.v1.train.Saver with Google's variable names (kernels stored [in, out]) and the
Adam slots (adam_m, adam_v) and global_step a training run saves beside them. The
weights are those of a tiny test model of tests/data/models, whose golden.json
(transformers' outputs on them) is the fixture's too: the source models run the tanh
GELU (gelu_new), which is what Google's BERT code computes for "gelu".
"""
import json
import os
import shutil
import sys

import numpy as np
import tensorflow as tf
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "data", "models")

# bert_config.json's keys, as Google's modeling.BertConfig writes them.
BERT_CONFIG_KEYS = ["attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob",
                    "hidden_size", "initializer_range", "intermediate_size",
                    "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
                    "type_vocab_size", "vocab_size"]


def source_weights(src):
    index = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(index):
        sd = {}
        for shard in sorted(set(json.load(open(index))["weight_map"].values())):
            sd.update(load_file(os.path.join(src, shard)))
        return sd
    return load_file(os.path.join(src, "model.safetensors"))


def google_name(hf, head):
    """transformers' BERT name -> (Google's variable name, transpose?)."""
    if hf.startswith("classifier."):
        return {"weight": "output_weights", "bias": "output_bias"}[hf.split(".")[-1]], False
    if hf.startswith("qa_outputs."):
        return {"weight": "cls/squad/output_weights", "bias": "cls/squad/output_bias"}[hf.split(".")[-1]], False
    parts = hf.split(".")
    assert parts[0] == "bert", hf
    if parts[1] == "embeddings" and parts[2].endswith("_embeddings"):
        return "/".join(parts[:3]), False
    out, transpose = [], False
    i = 0
    while i < len(parts):
        p = parts[i]
        if p == "layer" and i + 1 < len(parts) and parts[i + 1].isdigit():
            out.append(f"layer_{parts[i + 1]}")
            i += 2
            continue
        if i == len(parts) - 1:
            if parts[i - 1] == "LayerNorm":
                p = {"weight": "gamma", "bias": "beta"}[p]
            elif p == "weight":
                p, transpose = "kernel", True
        out.append(p)
        i += 1
    return "/".join(out), transpose


def make(out, name, src_name, bert_act="gelu", step=1000, junk=False, labels=None, hf_config=False):
    src, dst = os.path.join(MODELS, src_name), os.path.join(out, name)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    config = json.load(open(os.path.join(src, "config.json")))
    bert_config = {k: config[k] for k in BERT_CONFIG_KEYS if k in config}
    bert_config["hidden_act"] = bert_act
    bert_config.setdefault("attention_probs_dropout_prob", 0.1)
    bert_config.setdefault("hidden_dropout_prob", 0.1)
    bert_config.setdefault("initializer_range", 0.02)
    with open(os.path.join(dst, "bert_config.json"), "w") as f:
        json.dump(bert_config, f, indent=2)
    shutil.copy(os.path.join(src, "vocab.txt"), dst)
    if os.path.exists(os.path.join(src, "golden.json")):
        shutil.copy(os.path.join(src, "golden.json"), dst)

    sd = source_weights(src)
    rng = np.random.default_rng(0)
    g = tf.Graph()
    with g.as_default():
        variables = {}
        for hf, value in sd.items():
            if hf.endswith("position_ids"):
                continue
            tf_name, transpose = google_name(hf, None)
            v = np.ascontiguousarray(value.T if transpose else value).astype(np.float32)
            variables[tf_name] = (tf.compat.v1.get_variable(tf_name, initializer=v), v)
            if junk:  # what AdamWeightDecayOptimizer saves beside each variable
                for slot in ("adam_m", "adam_v"):
                    tf.compat.v1.get_variable(f"{tf_name}/{slot}",
                                              initializer=rng.standard_normal(v.shape).astype(np.float32))
        if junk:
            tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            # A relative path, so that the `checkpoint` file names it as a training run's
            # output folder does; the graph (.meta) is not kept: bertrt does not read it.
            cwd = os.getcwd()
            os.chdir(dst)
            try:
                path = os.path.join(dst, saver.save(sess, "model.ckpt", global_step=step,
                                                    write_meta_graph=False))
            finally:
                os.chdir(cwd)
    # Read back with TensorFlow's own reader.
    reader = tf.train.load_checkpoint(path)
    for tf_name, (_, v) in variables.items():
        assert np.array_equal(reader.get_tensor(tf_name), v), tf_name
    if labels:  # labels.txt: one per line, in the classifier's order
        with open(os.path.join(dst, "labels.txt"), "w") as f:
            f.write("".join(label + "\n" for label in labels))
    if hf_config:  # a head the variable names cannot tell: the user writes config.json
        shutil.copy(os.path.join(src, "config.json"), dst)
    print("wrote", name, os.path.basename(path), len(variables), "variables")
    return dst


def main():
    tf.compat.v1.disable_eager_execution()
    out = sys.argv[1] if len(sys.argv) > 1 else MODELS
    # run_classifier.py, with its Adam slots and global_step, labels in labels.txt
    make(out, "tf_seq_cls", "sharded", junk=True, labels=["负面", "正面"])
    make(out, "tf_squad", "qa", step=88)  # run_squad.py
    # An NER script's output_weights over every token: config.json says so
    make(out, "tf_ner", "token_cls", bert_act="relu", hf_config=True)


if __name__ == "__main__":
    main()

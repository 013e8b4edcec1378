#!/usr/bin/env python3
"""Write a random-weight Hugging Face BERT model directory of any size.

Needs only numpy. The safetensors files are written by hand (the format is an
8-byte little-endian header length, a JSON header, then the raw tensor bytes).

Examples:
  make_random_model.py --preset tiny --head seq-cls --num-labels 3 -o /tmp/m
  make_random_model.py --preset bert-base --head sentence --pooling mean --normalize -o /tmp/s
"""
import argparse
import json
import os
import shutil
import string
import sys

import numpy as np

PRESETS = {
    # hidden, layers, heads, intermediate, vocab, max positions
    "tiny": dict(hidden=32, layers=2, heads=4, intermediate=37, vocab_size=512, max_position=64),
    "bert-base": dict(hidden=768, layers=12, heads=12, intermediate=3072, vocab_size=30522,
                      max_position=512),
    "bert-large": dict(hidden=1024, layers=24, heads=16, intermediate=4096, vocab_size=30522,
                       max_position=512),
}

ARCHITECTURES = {
    "base": "BertModel",
    "seq-cls": "BertForSequenceClassification",
    "token-cls": "BertForTokenClassification",
    "qa": "BertForQuestionAnswering",
    "sentence": "BertModel",
}

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

COMMON_WORDS = """the of and to a in is it you that he was for on are with as i his they be at
one have this from or had by not word but what some we can out other were all there when up
use your how said an each she which do their time if will way about many then them write would
like so these her long make thing see him two has look more day could go come did number sound
no most people my over know water than call first who may down side been now find any new work
part take get place made live where after back little only round man year came show every good
me give our under name very through just form sentence great think say help low line differ
turn cause much mean before move right boy old too same tell does set three want air well also
play small end put home read hand port large spell add even land here must big high such follow
act why ask men change went light kind off need house picture try us again animal point mother
world near build self earth father head stand own page should country found answer school grow
study still learn plant cover food sun four between state keep eye never last let thought city
tree cross farm hard start might story saw far sea draw left late run don while press close
night real life few north open seem together next white children begin got walk example ease
paper group always music those both mark often letter until mile river car feet care second
book carry took science eat room friend began idea fish mountain stop once base hear horse cut
sure watch color face wood main enough plain girl usual young ready above ever red list though
feel talk bird soon body dog family direct pose leave song measure door product black short
numeral class wind question happen complete ship area half rock order fire south problem piece
told knew pass since top whole king space heard best hour better true during hundred five
remember step early hold west ground interest reach fast verb sing listen six table travel
less morning ten simple several vowel toward war lay against pattern slow center love person
money serve appear road map rain rule govern pull cold notice voice unit power town fine
certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct
able pound done beauty drive stood contain front teach week final gave green oh quick develop
ocean warm free minute strong special mind behind clear tail produce fact street inch multiply
nothing course stay wheel full force blue object decide surface deep moon island foot system
busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran check
game shape equate hot miss brought heat snow tire bring yes distant fill east paint language
among movie film great terrible awesome bad""".split()

SUFFIXES = ["s", "es", "ed", "ing", "ly", "er", "est", "ion", "tion", "ment", "ness", "able",
            "ful", "less", "al", "ic", "ous", "ive", "ize", "en", "y", "n't", "'s"]


def synthetic_vocab(size):
    """A WordPiece vocabulary in which ordinary English text tokenizes."""
    vocab = list(SPECIALS)
    vocab += list(string.punctuation)
    vocab += list(string.digits) + list(string.ascii_lowercase)
    vocab += ["##" + c for c in string.ascii_lowercase + string.digits]
    # A few CJK characters and an accented letter, so those tokenizer paths see use.
    vocab += ["中", "国", "人", "大", "学", "é"]
    if size < len(vocab):
        sys.exit(f"--vocab-size {size} is below the {len(vocab)} base tokens")
    seen = set(vocab)
    extra = [w for w in COMMON_WORDS if len(w) > 1] + ["##" + s for s in SUFFIXES]
    extra += [a + b for a in "tsaeiohnrl" for b in "heanroistl"]
    extra += ["##" + a + b for a in "etaoinshrl" for b in "etaoinshrl"]
    for w in extra:
        if len(vocab) == size:
            break
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    i = 0
    while len(vocab) < size:
        vocab.append(f"[unused{i}]")
        i += 1
    return vocab


def to_bytes(array, dtype):
    """Raw little-endian bytes of an fp32 array in the requested storage dtype."""
    a = np.ascontiguousarray(array)
    if a.dtype != np.float32:
        return a.astype(a.dtype.newbyteorder("<")).tobytes()
    if dtype == "f32":
        return a.astype("<f4").tobytes()
    if dtype == "f16":
        return a.astype("<f2").tobytes()
    # bf16: round to nearest even on the upper 16 bits of the fp32 pattern.
    bits = a.astype("<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


SAFETENSORS_DTYPE = {np.dtype("float32"): None, np.dtype("int64"): "I64",
                     np.dtype("bool"): "BOOL"}


def write_safetensors(path, tensors, dtype, metadata=None):
    header = {"__metadata__": metadata or {"format": "pt"}}
    blobs, offset = [], 0
    for name, array in tensors:
        st_dtype = SAFETENSORS_DTYPE[array.dtype] or {"f32": "F32", "f16": "F16",
                                                      "bf16": "BF16"}[dtype]
        blob = to_bytes(array, dtype)
        header[name] = {"dtype": st_dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data section 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def make_tensors(a, rng):
    """Weights in HF naming, scaled so that nothing saturates yet outputs depend on the input.

    Matrices get std 1/sqrt(fan_in): about BERT-base's 0.02-0.04 at real sizes, while a
    tiny model with std 0.02 would have near-uniform attention and input-blind outputs.
    """
    H, I = a.hidden, a.intermediate

    def mat(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    def emb(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def bias(n):
        return (rng.standard_normal(n) * 0.02).astype(np.float32)

    def gamma(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    def beta(n):
        return (rng.standard_normal(n) * 0.05).astype(np.float32)

    t = []
    enc = {"auto": "bert." if a.head in ("seq-cls", "token-cls", "qa") else "",
           "bert": "bert.", "none": ""}[a.prefix]
    t.append((enc + "embeddings.word_embeddings.weight", emb(a.vocab_size, H)))
    t.append((enc + "embeddings.position_embeddings.weight", emb(a.max_position, H)))
    t.append((enc + "embeddings.token_type_embeddings.weight", emb(a.type_vocab, H)))
    t.append((enc + "embeddings.LayerNorm.weight", gamma(H)))
    t.append((enc + "embeddings.LayerNorm.bias", beta(H)))
    for i in range(a.layers):
        p = f"{enc}encoder.layer.{i}."
        for n in ("query", "key", "value"):
            t.append((p + f"attention.self.{n}.weight", mat(H, H)))
            t.append((p + f"attention.self.{n}.bias", bias(H)))
        t.append((p + "attention.output.dense.weight", mat(H, H)))
        t.append((p + "attention.output.dense.bias", bias(H)))
        t.append((p + "attention.output.LayerNorm.weight", gamma(H)))
        t.append((p + "attention.output.LayerNorm.bias", beta(H)))
        t.append((p + "intermediate.dense.weight", mat(I, H)))
        t.append((p + "intermediate.dense.bias", bias(I)))
        t.append((p + "output.dense.weight", mat(H, I)))
        t.append((p + "output.dense.bias", bias(H)))
        t.append((p + "output.LayerNorm.weight", gamma(H)))
        t.append((p + "output.LayerNorm.bias", beta(H)))
    # transformers builds token classification and QA models without a pooler.
    if a.head in ("base", "seq-cls", "sentence"):
        t.append((enc + "pooler.dense.weight", mat(H, H)))
        t.append((enc + "pooler.dense.bias", bias(H)))
    head = enc[:-len("bert.")] if enc.endswith("bert.") else enc
    if a.head in ("seq-cls", "token-cls"):
        t.append((head + "classifier.weight", mat(a.num_labels, H)))
        t.append((head + "classifier.bias", bias(a.num_labels)))
    elif a.head == "qa":
        t.append((head + "qa_outputs.weight", mat(2, H)))
        t.append((head + "qa_outputs.bias", bias(2)))
    if a.add_training_junk:
        t.append((enc + "embeddings.position_ids",
                  np.arange(a.max_position, dtype=np.int64).reshape(1, -1)))
        t.append(("cls.predictions.bias", bias(a.vocab_size)))
        t.append(("cls.predictions.transform.dense.weight", mat(H, H)))
        t.append((enc + "encoder.layer.0.attention.self.query.weight.adam_m", mat(H, H)))
        t.append((enc + "encoder.layer.0.attention.self.query.weight.adam_v", mat(H, H)))
        t.append(("global_step", np.array(1000, dtype=np.int64)))
        t.append(("early_stopping_flag", np.array([False])))
    return t


def write_config(a, out):
    cfg = {
        "architectures": [ARCHITECTURES[a.head]],
        "model_type": "bert",
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout": None,
        "hidden_act": a.act,
        "hidden_dropout_prob": 0.1,
        "hidden_size": a.hidden,
        "initializer_range": 0.02,
        "intermediate_size": a.intermediate,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": a.max_position,
        "num_attention_heads": a.heads,
        "num_hidden_layers": a.layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[a.dtype],
        "type_vocab_size": a.type_vocab,
        "use_cache": True,
        "vocab_size": a.vocab_size,
    }
    if a.head in ("seq-cls", "token-cls"):
        names = ([f"CLASS_{i}" for i in range(a.num_labels)] if a.head == "seq-cls" else
                 ["O"] + [f"{p}-{k}" for k in ("PER", "LOC", "ORG", "MISC") for p in "BI"])
        names = (names + [f"LABEL_{i}" for i in range(len(names), a.num_labels)])[:a.num_labels]
        cfg["id2label"] = {str(i): n for i, n in enumerate(names)}
        cfg["label2id"] = {n: i for i, n in enumerate(names)}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def tokenizer_json(vocab):
    """The `tokenizers` serialization of BERT's WordPiece pipeline over `vocab`."""
    ids = {t: i for i, t in enumerate(vocab)}

    def special(tok, type_id):
        return {"SpecialToken": {"id": tok, "type_id": type_id}}

    def seq(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}

    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": ids[t], "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for t in SPECIALS],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)],
            "pair": [special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1),
                     special("[SEP]", 1)],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]}
                               for t in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }


def write_tokenizer(a, out):
    if a.tokenizer_from:
        copied = False
        for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json",
                     "special_tokens_map.json"):
            src = os.path.join(a.tokenizer_from, name)
            if os.path.exists(src):
                shutil.copy(src, os.path.join(out, name))
                copied = True
        if not copied:
            sys.exit(f"--tokenizer-from {a.tokenizer_from}: no tokenizer files there")
        return
    vocab = synthetic_vocab(a.vocab_size)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    if a.tokenizer_json:
        with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tokenizer_json(vocab), f, ensure_ascii=False, indent=1)
    tok_cfg = {"tokenizer_class": "BertTokenizer", "do_lower_case": True,
               "tokenize_chinese_chars": True, "strip_accents": None,
               "model_max_length": a.max_position, "unk_token": "[UNK]", "sep_token": "[SEP]",
               "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
               "clean_up_tokenization_spaces": True}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tok_cfg, f, indent=2)


def write_sentence_modules(a, out):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if a.normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    pooling = {"word_embedding_dimension": a.hidden,
               "pooling_mode_cls_token": a.pooling == "cls",
               "pooling_mode_mean_tokens": a.pooling == "mean",
               "pooling_mode_max_tokens": a.pooling == "max",
               "pooling_mode_mean_sqrt_len_tokens": False,
               "pooling_mode_weightedmean_tokens": False,
               "pooling_mode_lasttoken": False,
               "include_prompt": True}
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f, indent=2)
    with open(os.path.join(out, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": a.max_seq_length or a.max_position,
                   "do_lower_case": False}, f, indent=2)


def write_weights(a, out, tensors):
    if a.shards <= 1:
        write_safetensors(os.path.join(out, "model.safetensors"), tensors, a.dtype)
        return
    # Split into contiguous runs of about equal byte size, as save_pretrained does.
    sizes = [t[1].nbytes for t in tensors]
    target = sum(sizes) / a.shards
    groups, current, acc = [], [], 0
    for item, size in zip(tensors, sizes):
        if current and acc + size > target and len(groups) < a.shards - 1:
            groups.append(current)
            current, acc = [], 0
        current.append(item)
        acc += size
    groups.append(current)
    weight_map = {}
    for i, group in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(os.path.join(out, name), group, a.dtype)
        weight_map.update({n: name for n, _ in group})
    total = sum(os.path.getsize(os.path.join(out, f)) for f in set(weight_map.values()))
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for name in ("hidden", "layers", "heads", "intermediate", "vocab-size", "max-position"):
        p.add_argument("--" + name, type=int, help="overrides the preset")
    p.add_argument("--type-vocab", type=int, default=2)
    p.add_argument("--act", choices=["gelu", "gelu_new", "gelu_pytorch_tanh", "relu"],
                   default="gelu")
    p.add_argument("--head", choices=sorted(ARCHITECTURES), default="base")
    p.add_argument("--num-labels", type=int, default=2)
    p.add_argument("--pooling", choices=["cls", "mean", "max"], default="mean")
    p.add_argument("--normalize", action="store_true")
    p.add_argument("--max-seq-length", type=int, help="sentence_bert_config max_seq_length")
    p.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    p.add_argument("--prefix", choices=["auto", "bert", "none"], default="auto",
                   help="encoder tensor prefix; auto: 'bert.' for task heads, none for base")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--add-training-junk", action="store_true",
                   help="add optimizer slots, MLM head and step counters to the checkpoint")
    p.add_argument("--tokenizer-from", help="copy tokenizer files from this directory")
    p.add_argument("--tokenizer-json", action="store_true",
                   help="also write tokenizer.json for the synthetic vocabulary")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args(argv)
    for key, value in PRESETS[a.preset].items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.hidden % a.heads:
        p.error(f"--hidden {a.hidden} is not a multiple of --heads {a.heads}")
    return a


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.output, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    write_config(a, a.output)
    write_weights(a, a.output, make_tensors(a, rng))
    write_tokenizer(a, a.output)
    if a.head == "sentence":
        write_sentence_modules(a, a.output)


if __name__ == "__main__":
    main(sys.argv[1:])

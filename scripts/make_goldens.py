#!/usr/bin/env python3
"""Write golden.json next to each test model: reference outputs from HF transformers.

  /opt/gold/bin/python scripts/make_goldens.py [MODEL_DIR ...]

Without arguments, every directory under tests/data/models is done. Each model
runs in fp32 on CPU, one input at a time (no padding), with eager attention.
Sentence-transformers directories run through SentenceTransformer (encode, so
the default prompt applies; prompt_runs holds each named prompt's embeddings).
"""
import json
import os
import sys

import numpy as np
import sentence_transformers
import tokenizers
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "data", "models")

TEXTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Can you tell me, which way is north? I think it's left of the big red house, "
    "near 42 Oak street!",
    "中国人 café résumé",
]
PAIRS = [("what is the answer?", "the answer is found in this long line of text about water.")]
# Longer than max_seq_length of the sentence models, to exercise truncation there.
MAX_TOKENS_FOR_HIDDEN_STATE = 30
LONG_TEXT = " ".join(["every good boy does fine and then some more words follow"] * 9)
# A model with at least this many positions (ModernBERT's 8,192) also gets one
# input that fills every position (the text repeated, truncated to the model's
# limit as `bertrt run` truncates by default).
FULL_LENGTH_FROM = 4096


def rounded(x):
    """Nested lists with 7 significant digits (fp32 has ~7); keeps files small."""
    a = np.asarray(x, dtype=np.float64)
    return json.loads(json.dumps(np.vectorize(lambda v: float(f"{v:.7g}"))(a).tolist()))


def sparse(vector):
    """A vocabulary-wide vector as `bertrt run` writes it: its non-zero entries."""
    v = np.asarray(vector, dtype=np.float64)
    nz = np.nonzero(v)[0]
    return {"indices": nz.tolist(), "values": rounded(v[nz])}


def hf_golden(model_dir, config):
    arch = config["architectures"][0]
    model = getattr(transformers, arch).from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    cases = [(t, None) for t in TEXTS] + PAIRS
    positions = config.get("max_position_embeddings", 0)
    full_length = " ".join([LONG_TEXT] * (positions // 50))
    if positions >= FULL_LENGTH_FROM:
        cases.append((full_length, None))
    out = []
    for text, pair in cases:
        enc = (tok(text, return_tensors="pt", truncation=True, max_length=positions)
               if text is full_length else tok(text, pair, return_tensors="pt"))
        # The model gets what its tokenizer hands it (RoBERTa and DistilBERT
        # take no token types); the golden records the tokenizer's type ids,
        # which `bertrt tokenize` prints whatever the model does with them.
        inputs = {k: v for k, v in enc.items() if k in tok.model_input_names}
        with torch.no_grad():
            res = model(**inputs)
        rec = {"text": text, "input_ids": enc["input_ids"][0].tolist(),
               "token_type_ids": enc.encodings[0].type_ids}
        if pair is not None:
            rec["text_pair"] = pair
        if arch.endswith(("ForSequenceClassification", "ForTokenClassification")):
            rec["logits"] = rounded(res.logits[0])
        elif arch.endswith("ForMaskedLM"):
            # SPLADE, as the naver/splade reference and sentence-transformers'
            # SpladePooling compute it: log(1 + relu(logits)), max over tokens.
            rec["sparse_embedding"] = sparse(
                torch.log1p(torch.relu(res.logits[0])).max(dim=0).values)
        elif arch.endswith("ForQuestionAnswering"):
            rec["start_logits"] = rounded(res.start_logits[0])
            rec["end_logits"] = rounded(res.end_logits[0])
        else:
            rec["pooler_output"] = rounded(res.pooler_output[0])
            # Per-token states of long inputs would dominate the file size.
            if enc["input_ids"].shape[1] <= MAX_TOKENS_FOR_HIDDEN_STATE:
                rec["last_hidden_state"] = rounded(res.last_hidden_state[0])
        out.append(rec)
    golden = {"kind": "transformers", "architecture": arch, "inputs": out}
    if positions >= FULL_LENGTH_FROM:
        golden["max_seq_length"] = positions  # what the full-length input was cut to
    return golden


def st_golden(model_dir):
    model = sentence_transformers.SentenceTransformer(model_dir, device="cpu")
    model.eval()
    out = []
    for text in TEXTS + [LONG_TEXT]:
        features = model.tokenize([text])
        emb = model.encode([text], convert_to_numpy=True, batch_size=1)[0]
        types = features.get("token_type_ids", torch.zeros_like(features["input_ids"]))
        rec = {"text": text, "input_ids": features["input_ids"][0].tolist(),
               "token_type_ids": types[0].tolist(),
               "sentence_embedding": rounded(emb)}
        out.append(rec)
    golden = {"kind": "sentence_transformers", "max_seq_length": model.max_seq_length,
              "inputs": out}
    # Each prompt the directory names (sentence_embedding above has the
    # default one, if any); sentence-transformers 5+ also offers empty
    # "query" and "document" prompts for every model, which are not the model's.
    declared = {}
    settings = os.path.join(model_dir, "config_sentence_transformers.json")
    if os.path.exists(settings):
        with open(settings) as f:
            declared = json.load(f).get("prompts") or {}
    if declared:
        texts = TEXTS + [LONG_TEXT]
        golden["prompt_runs"] = {
            name: rounded(model.encode(texts, prompt_name=name, convert_to_numpy=True, batch_size=1))
            for name in sorted(declared)}
    return golden


def sparse_encoder_golden(model_dir):
    from sentence_transformers.sparse_encoder import SparseEncoder
    model = SparseEncoder(model_dir, device="cpu")
    model.eval()
    out = []
    for text in TEXTS + [LONG_TEXT]:
        features = model.tokenize([text])
        emb = model.encode([text], convert_to_tensor=True, batch_size=1)[0]
        emb = emb.to_dense() if emb.is_sparse else emb
        types = features.get("token_type_ids", torch.zeros_like(features["input_ids"]))
        out.append({"text": text, "input_ids": features["input_ids"][0].tolist(),
                    "token_type_ids": types[0].tolist(),
                    "sparse_embedding": sparse(emb.cpu().numpy())})
    return {"kind": "sparse_encoder", "max_seq_length": model.max_seq_length, "inputs": out}


def make(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    modules = os.path.join(model_dir, "modules.json")
    if os.path.exists(modules) and "SpladePooling" in open(modules).read():
        golden = sparse_encoder_golden(model_dir)
    elif os.path.exists(modules):
        golden = st_golden(model_dir)
    else:
        golden = hf_golden(model_dir, config)
    golden["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                          "sentence_transformers": sentence_transformers.__version__,
                          "tokenizers": tokenizers.__version__}
    golden["note"] = ("fp32 CPU, eager attention, one input at a time; values rounded to "
                      "7 significant digits")
    path = os.path.join(model_dir, "golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {os.path.getsize(path)} bytes")


def main(argv):
    torch.manual_seed(0)
    dirs = argv or sorted(os.path.join(MODELS, d) for d in os.listdir(MODELS)
                          if os.path.isfile(os.path.join(MODELS, d, "config.json")))
    for d in dirs:
        make(d)


if __name__ == "__main__":
    main(sys.argv[1:])

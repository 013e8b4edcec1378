#!/usr/bin/env python3
"""Builds the small cased test tokenizers under tests/data/tokenizer/.

From the uncased all-MiniLM-L6-v2 vocabulary (BERTRT_DEFAULT_MODEL_DIR, default
models/all-MiniLM-L6-v2) it keeps the special tokens, every single-character
token, the most common words and subwords, then adds Capitalized and UPPER
variants, accented Latin, Greek and Cyrillic letters in both cases and extra CJK
characters, so cased vocabularies exercise case- and accent-sensitive lookups.
Writes:
  cased/tokenizer.json       (BertProcessing post-processor, lowercase=false)
  vocab_only/vocab.txt + tokenizer_config.json + special_tokens_map.json
"""
import json
import os
import pathlib

from tokenizers.implementations import BertWordPieceTokenizer

HERE = pathlib.Path(__file__).resolve().parent
MODEL = pathlib.Path(os.environ.get("BERTRT_DEFAULT_MODEL_DIR", "models/all-MiniLM-L6-v2"))


def main():
    uncased = (MODEL / "vocab.txt").read_text(encoding="utf-8").splitlines()
    out, seen = [], set()

    def add(tok):
        if tok and tok not in seen:
            seen.add(tok)
            out.append(tok)

    for tok in uncased[:1000]:  # [PAD], [unusedN], [UNK], [CLS], [SEP], [MASK], single chars
        add(tok)
    words = [t for t in uncased[1000:] if t.isalpha() and not t.startswith("##")][:7000]
    pieces = [t for t in uncased if t.startswith("##")][:2500]
    for tok in uncased:
        if len(tok) == 1 or (tok.startswith("##") and len(tok) == 3):
            add(tok)
    for w in words:
        add(w)
    for p in pieces:
        add(p)
    for w in words[:3000]:
        add(w.capitalize())
        add(w.upper())
        add("##" + w.upper())
    letters = [chr(c) for c in list(range(0xC0, 0x250)) + list(range(0x391, 0x3CA)) + list(range(0x400, 0x460))]
    for ch in letters:
        if ch.isalpha():
            add(ch)
            add("##" + ch)
    for c in range(0x4E00, 0x4E00 + 1500):
        add(chr(c))
        add("##" + chr(c))
    for extra in ["İstanbul", "Straße", "Café", "café", "naïve", "Москва", "ΣΑΣ", "σας", "Ångström"]:
        add(extra)

    vocab_dir = HERE / "vocab_only"
    vocab_dir.mkdir(exist_ok=True)
    (vocab_dir / "vocab.txt").write_text("\n".join(out) + "\n", encoding="utf-8")
    (vocab_dir / "tokenizer_config.json").write_text(json.dumps({
        "do_lower_case": False, "strip_accents": None, "tokenize_chinese_chars": True,
        "tokenizer_class": "BertTokenizer", "model_max_length": 512}, indent=2) + "\n")
    (vocab_dir / "special_tokens_map.json").write_text(json.dumps({
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "cls_token": "[CLS]", "mask_token": "[MASK]"}, indent=2) + "\n")

    tok = BertWordPieceTokenizer(str(vocab_dir / "vocab.txt"), lowercase=False, strip_accents=None)
    cased_dir = HERE / "cased"
    cased_dir.mkdir(exist_ok=True)
    tok.save(str(cased_dir / "tokenizer.json"))
    print(f"{len(out)} tokens")


if __name__ == "__main__":
    main()

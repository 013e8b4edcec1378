"""Parity of `bertrt tokenize` with PyPI `tokenizers` over the test corpus.

Runs the real binary (BERTRT_BIN, default build/bertrt) on every corpus line,
singles and pairs, without truncation and with several max lengths under all
three strategies, and requires identical input_ids, token_type_ids, offsets and
special_tokens_mask
(and an error line wherever `tokenizers` raises). Tokenizers covered: the
default model (BERTRT_DEFAULT_MODEL_DIR, default models/all-MiniLM-L6-v2), the
committed cased tokenizer.json and vocab.txt-only directories, normalizer
setting variants of them, and one with added tokens using lstrip, rstrip,
single_word and normalized.

Run: pytest -s tests/tokenizer/test_parity.py
"""
import copy
import json
import os
import pathlib
import subprocess

import pytest
from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "tokenizer"
BIN = pathlib.Path(os.environ.get("BERTRT_BIN", ROOT / "build" / "bertrt"))
DEFAULT_MODEL = pathlib.Path(os.environ.get("BERTRT_DEFAULT_MODEL_DIR", ROOT / "models" / "all-MiniLM-L6-v2"))
MAX_LENGTHS = [1, 2, 3, 4, 5, 7, 8, 16, 64]
STRATEGIES = ["longest_first", "only_first", "only_second"]
CORPUS = [json.loads(line) for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if line]
TOTALS = {"encodings": 0, "errors": 0}


def hf_from_json(path):
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def hf_from_vocab_dir(d):
    config = json.loads((d / "tokenizer_config.json").read_text())
    tok = BertWordPieceTokenizer(str(d / "vocab.txt"), clean_text=True,
                                 handle_chinese_chars=config.get("tokenize_chinese_chars", True),
                                 strip_accents=config.get("strip_accents"),
                                 lowercase=config.get("do_lower_case", True))
    tok.no_truncation()
    tok.no_padding()
    return tok


def json_variant(src, dst_dir, edit):
    data = json.loads(pathlib.Path(src).read_text(encoding="utf-8"))
    edit(data)
    dst_dir.mkdir(parents=True, exist_ok=True)
    (dst_dir / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return dst_dir


def set_normalizer(strip, lower):
    def edit(data):
        data["normalizer"]["strip_accents"] = strip
        data["normalizer"]["lowercase"] = lower
    return edit


def add_tokens(data):
    next_id = max(data["model"]["vocab"].values()) + 1
    extra = [("[FOO]", dict(lstrip=True, rstrip=True, normalized=False, special=True)),
             ("Hello", dict(normalized=True)),
             ("wor", dict(single_word=True, normalized=False)),
             ("ΣΑΣ", dict(normalized=True)),
             ("[MASK]", None)]
    for content, flags in extra:
        if flags is None:  # make the existing [MASK] strip spaces on its left
            for tok in data["added_tokens"]:
                if tok["content"] == content:
                    tok["lstrip"] = True
            continue
        tok = dict(id=next_id, content=content, single_word=False, lstrip=False, rstrip=False,
                   normalized=False, special=False)
        tok.update(flags)
        data["added_tokens"].append(tok)
        next_id += 1


def configs(tmp):
    out = []
    if (DEFAULT_MODEL / "tokenizer.json").exists():
        out.append(("default", DEFAULT_MODEL, hf_from_json(DEFAULT_MODEL / "tokenizer.json")))
        d = json_variant(DEFAULT_MODEL / "tokenizer.json", tmp / "default_added", add_tokens)
        out.append(("default+added", d, hf_from_json(d / "tokenizer.json")))
    cased = DATA / "cased" / "tokenizer.json"
    out.append(("cased", cased.parent, hf_from_json(cased)))
    for strip in (True, False, None):
        for lower in (True, False):
            name = f"cased strip={strip} lower={lower}"
            d = json_variant(cased, tmp / f"cased_{strip}_{lower}", set_normalizer(strip, lower))
            out.append((name, d, hf_from_json(d / "tokenizer.json")))
    d = json_variant(cased, tmp / "cased_added", add_tokens)
    out.append(("cased+added", d, hf_from_json(d / "tokenizer.json")))
    vocab_only = DATA / "vocab_only"
    out.append(("vocab_only", vocab_only, hf_from_vocab_dir(vocab_only)))
    for lower, strip in ((True, None), (True, False), (False, True)):
        d = tmp / f"vocab_only_{lower}_{strip}"
        d.mkdir()
        (d / "vocab.txt").write_bytes((vocab_only / "vocab.txt").read_bytes())
        (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lower, "strip_accents": strip}))
        out.append((f"vocab_only lower={lower} strip={strip}", d, hf_from_vocab_dir(d)))
    return out


def run_bertrt(model_dir, args):
    stdin = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in CORPUS)
    proc = subprocess.run([str(BIN), "tokenize", str(model_dir), *args], input=stdin.encode(),
                          capture_output=True, check=False)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    lines = proc.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(CORPUS)
    return [json.loads(line) for line in lines]


def hf_encode(tok, item):
    try:
        enc = tok.encode(item["text"], item.get("text_pair"))
    except Exception as e:  # tokenizers raises on impossible truncation
        return {"error": str(e)}
    return {"input_ids": enc.ids, "token_type_ids": enc.type_ids, "offsets": [list(o) for o in enc.offsets],
            "special_tokens_mask": enc.special_tokens_mask,
            "word_ids": enc.word_ids}


def compare(name, tok, model_dir, max_length, strategy):
    if max_length:
        tok.enable_truncation(max_length, strategy=strategy)
        got = run_bertrt(model_dir, ["--max-length", str(max_length), "--truncation", strategy])
    else:
        tok.no_truncation()
        got = run_bertrt(model_dir, [])
    mismatches = []
    for i, (item, mine) in enumerate(zip(CORPUS, got)):
        want = hf_encode(tok, item)
        if "error" in want:
            TOTALS["errors"] += 1
            if "error" not in mine:
                mismatches.append((i, item, "HF: " + want["error"], mine))
            continue
        TOTALS["encodings"] += 1
        if mine != want:
            mismatches.append((i, item, want, mine))
    assert not mismatches, f"{name} max_length={max_length} {strategy}: {len(mismatches)} mismatches, first: {mismatches[0]}"


@pytest.fixture(scope="module")
def all_configs(tmp_path_factory):
    assert BIN.exists(), f"{BIN} not found; build it or set BERTRT_BIN"
    if not (DEFAULT_MODEL / "tokenizer.json").exists():
        print(f"\nNOTE: default model not found at {DEFAULT_MODEL} (set BERTRT_DEFAULT_MODEL_DIR); "
              "its parity checks are skipped")
    return configs(tmp_path_factory.mktemp("tok"))


def test_default_model_present():
    if not (DEFAULT_MODEL / "tokenizer.json").exists():
        pytest.skip(f"default model not found at {DEFAULT_MODEL}; set BERTRT_DEFAULT_MODEL_DIR")


def test_parity(all_configs):
    for name, model_dir, tok in all_configs:
        compare(name, tok, model_dir, 0, "longest_first")
        for max_length in MAX_LENGTHS:
            for strategy in STRATEGIES:
                compare(name, tok, model_dir, max_length, strategy)
    print(f"\nparity: {len(all_configs)} tokenizers x {len(CORPUS)} corpus lines x "
          f"{1 + len(MAX_LENGTHS) * len(STRATEGIES)} truncation settings: "
          f"{TOTALS['encodings']} encodings identical, {TOTALS['errors']} HF truncation errors "
          f"matched by bertrt errors")

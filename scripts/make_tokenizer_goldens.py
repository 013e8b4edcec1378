"""Writes tests/data/tokenizer/{xlmr,roberta,modernbert}/golden.jsonl: HF
`tokenizers`' encodings of the corpus and tests/data/tokenizer/component_texts.json
(emoji, combining marks, CJK, Thai, Arabic, Devanagari, zero-width and control
chars, long words, spaces, \\r\\n, whitespace-only text), singles and pairs,
without truncation and at max_length 16 under each strategy. One line per
encoding: {"text", "text_pair"?, "max_length", "truncation", then "input_ids",
"token_type_ids", "offsets", "special_tokens_mask", without truncation also
"decoded" and "decoded_with_special" (HF's decode), or "error"}.
tests/unit/pipeline_golden_test.cc compares the C++ tokenizer with them, so the
parity holds without Python (tests/tokenizer/test_pipeline_parity.py checks the
live package too).

Run: python3 scripts/make_tokenizer_goldens.py   (tokenizers 0.23.3)
"""
import json
import pathlib

import tokenizers
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "tokenizer"
SETTINGS = [(0, "longest_first"), (16, "longest_first"), (16, "only_first"), (16, "only_second")]


def items():
    corpus = [json.loads(l) for l in (DATA / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if l]
    texts = json.loads((DATA / "component_texts.json").read_text(encoding="utf-8"))
    extra = [{"text": t} for t in texts]
    extra += [{"text": texts[i], "text_pair": texts[-1 - i]} for i in range(0, len(texts), 3)]
    return corpus + extra


def main():
    assert tokenizers.__version__ == "0.23.3", tokenizers.__version__
    for name in ("xlmr", "roberta", "modernbert"):
        tok = Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
        tok.no_padding()
        lines = []
        for max_length, strategy in SETTINGS:
            if max_length:
                tok.enable_truncation(max_length, strategy=strategy)
            else:
                tok.no_truncation()
            for item in items():
                rec = dict(item, max_length=max_length, truncation=strategy)
                try:
                    enc = tok.encode(item["text"], item.get("text_pair"))
                    rec.update(input_ids=enc.ids, token_type_ids=enc.type_ids,
                               offsets=[list(o) for o in enc.offsets],
                               special_tokens_mask=enc.special_tokens_mask)
                    if not max_length:
                        rec["decoded"] = tok.decode(enc.ids, skip_special_tokens=True)
                        rec["decoded_with_special"] = tok.decode(enc.ids, skip_special_tokens=False)
                except Exception as e:  # impossible truncation
                    rec["error"] = str(e)
                lines.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
        out = DATA / name / "golden.jsonl"
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{out}: {len(lines)} encodings")


DECODERS = [
    ("xlmr", {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}),
    ("xlmr", {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}),
    ("xlmr", {"type": "WordPiece", "prefix": "▁", "cleanup": True}),
    ("xlmr", {"type": "BPEDecoder", "suffix": "a"}),
    ("xlmr", None),
    ("roberta", {"type": "Sequence", "decoders": [{"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                                                  {"type": "Strip", "content": "H", "start": 2, "stop": 2}]}),
    ("modernbert", {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"Regex": "Ġ+"}, "content": "_"}, {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}),
]


def decoder_goldens():
    """tests/data/tokenizer/decoders.json: HF's decode of encodings under
    other decoders (Sequence, Replace, ByteFallback, Fuse, Strip, Metaspace
    never, WordPiece, BPEDecoder, none) for tests/unit/pipeline_golden_test.cc."""
    texts = json.loads((DATA / "component_texts.json").read_text(encoding="utf-8"))
    corpus = [json.loads(l)["text"] for l in (DATA / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if l]
    cases = []
    for base, decoder in DECODERS:
        spec = json.loads((DATA / base / "tokenizer.json").read_text(encoding="utf-8"))
        spec["decoder"] = decoder
        tok = Tokenizer.from_str(json.dumps(spec))
        for text in texts + corpus[:40]:
            ids = tok.encode(text).ids
            # Byte tokens for ByteFallback, spliced in where the ids allow.
            if base == "xlmr":
                ids = ids[:3] + [tok.token_to_id("<unk>")] + ids[3:]
            for skip in (True, False):
                cases.append({"base": base, "decoder": decoder, "ids": ids, "skip_special_tokens": skip,
                              "decoded": tok.decode(ids, skip_special_tokens=skip)})
    (DATA / "decoders.json").write_text(json.dumps(cases, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{DATA / 'decoders.json'}: {len(cases)} decodings")


if __name__ == "__main__":
    main()
    decoder_goldens()

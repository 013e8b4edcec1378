"""A BERT model that ships a non-WordPiece tokenizer, end to end.

paraphrase-multilingual-MiniLM is a BertModel with XLM-R's Unigram tokenizer:
bertrt must take the tokenizer from tokenizer.json, not from the architecture.
This builds random-weight BertModel directories (scripts/make_random_model.py)
around the committed XLM-R-, RoBERTa- and ModernBERT-shape tokenizer.json files
and requires `bertrt run` to give HF transformers' last_hidden_state (fp32, on
the ids HF `tokenizers` makes) for multilingual texts and a pair.

Run: pytest -s tests/tokenizer/test_pipeline_models.py
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "tokenizer"
BIN = pathlib.Path(os.environ.get("BERTRT_BIN", ROOT / "build" / "bertrt"))
TEXTS = [
    {"text": "Hello world, this is a test."},
    {"text": "Привет, мир! 中文文本 ภาษาไทย 😀 e\u0301"},
    {"text": "  leading spaces\r\nand <mask> tokens"},
    {"text": "Who wrote it?", "text_pair": "It was written by me."},
]


@pytest.mark.parametrize("name", ["xlmr", "roberta", "modernbert"])
def test_bert_model_with_other_tokenizer(name, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    assert BIN.exists(), f"{BIN} not found; build it or set BERTRT_BIN"
    tok = Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
    model_dir = tmp_path / name
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_random_model.py"), "--head", "base",
                    "--vocab-size", str(tok.get_vocab_size()), "--max-position", "128",
                    "--tokenizer-from", str(DATA / name), "-o", str(model_dir)], check=True,
                   capture_output=True)
    stdin = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in TEXTS)
    proc = subprocess.run([str(BIN), "run", str(model_dir), "--output", "last_hidden_state",
                           "--threads", "1"], input=stdin.encode(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    got = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    hf = transformers.BertModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    for item, out in zip(TEXTS, got):
        enc = tok.encode(item["text"], item.get("text_pair"))
        with torch.no_grad():
            want = hf(input_ids=torch.tensor([enc.ids]),
                      token_type_ids=torch.tensor([enc.type_ids])).last_hidden_state[0].numpy()
        mine = np.asarray(out["last_hidden_state"], dtype=np.float32)
        assert mine.shape == want.shape, (name, item)
        assert np.max(np.abs(mine - want)) < 1e-4 * max(1.0, np.max(np.abs(want))), (name, item)


def test_plan_carries_the_tokenizer(tmp_path):
    """A plan stores the tokenizer.json bytes and rebuilds the same tokenizer."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(DATA / "xlmr" / "tokenizer.json"))
    model_dir = tmp_path / "xlmr_model"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_random_model.py"), "--head", "base",
                    "--vocab-size", str(tok.get_vocab_size()), "--max-position", "128",
                    "--tokenizer-from", str(DATA / "xlmr"), "-o", str(model_dir)], check=True,
                   capture_output=True)
    plan = tmp_path / "xlmr.plan"
    proc = subprocess.run([str(BIN), "build", str(model_dir), "-o", str(plan)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    stdin = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in TEXTS).encode()
    outs = [subprocess.run([str(BIN), "tokenize", str(p)], input=stdin, capture_output=True,
                           check=True).stdout for p in (model_dir, plan)]
    assert outs[0] == outs[1]


def test_served_tokenize_and_decode(tmp_path):
    """The server's TEI routes on such models: /tokenize gives HF's ids and the
    input's own text at each token's byte offsets, /decode gives HF's text."""
    pytest.importorskip("requests")
    sys.path.insert(0, str(ROOT / "tests" / "server"))
    from server_util import Server
    from tokenizers import Tokenizer

    texts = ["Hello, world! It's a test.", "Привет мир, naïve café 中文", "x <mask> y  z"]
    for name in ("xlmr", "roberta"):
        tok = Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
        model_dir = tmp_path / name
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_random_model.py"), "--head", "base",
                        "--vocab-size", str(tok.get_vocab_size()), "--max-position", "128",
                        "--tokenizer-from", str(DATA / name), "-o", str(model_dir)], check=True,
                       capture_output=True)
        s = Server(str(BIN), [str(model_dir)], grpc=False)
        try:
            for text in texts:
                enc = tok.encode(text)
                r = s.post("/tokenize", {"inputs": text})
                assert r.status_code == 200, r.text
                got = r.json()[0]
                assert [t["id"] for t in got] == enc.ids, (name, text)
                raw = text.encode()
                for t in got:
                    if not t["special"]:
                        assert t["text"] == raw[t["start"]:t["stop"]].decode(errors="replace"), (name, t)
                for skip in (True, False):
                    r = s.post("/decode", {"ids": enc.ids, "skip_special_tokens": skip})
                    assert r.status_code == 200, r.text
                    assert r.json() == [tok.decode(enc.ids, skip_special_tokens=skip)], (name, text, skip)
            r = s.post("/embed", {"inputs": texts})
            assert r.status_code == 200 and len(r.json()) == len(texts), r.text
        finally:
            s.stop()

"""`--precision int8` on the CPU: the encoder's GEMMs in int8, calibrated at load on the
built-in corpus or on --calibrate FILE, with an accuracy report against fp32 on stderr and
embeddings close to fp32's (the default model, trained weights: what the report's budget
holds it to)."""
import json
import subprocess

import numpy as np

from conftest import ROOT, run_jsonl

# One line each (a text file holds one text per line).
CORPUS = [t for t in (json.loads(line)["text"] for line in
          (ROOT / "tests/data/tokenizer/corpus.jsonl").read_text(encoding="utf-8").split("\n")
          if line) if t.strip() and not any(c in t for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")]


def cosines(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_int8_embeddings_stay_close_to_fp32_and_are_reported(bertrt_bin, default_model):
    records = [{"text": t} for t in CORPUS[:40]]
    _, fp32, _ = run_jsonl(bertrt_bin, ["run", default_model], records)
    _, int8, err = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "int8"], records)
    assert "built-in corpus" in err and "--calibrate FILE" in err, err
    assert "int8 GEMMs in 24 of 24 Linears, calibrated (per token, SmoothQuant 0.5)" in err, err
    assert "(within the budget)" in err and "top-10 overlap" in err, err
    c = cosines([r["embedding"] for r in int8], [r["embedding"] for r in fp32])
    # Texts the calibration never saw: the budget's mean, and a floor below its minimum.
    assert c.mean() >= 0.998 and c.min() >= 0.98, (c.mean(), c.min())
    assert c.max() < 1.0 - 1e-7, "the int8 GEMMs ran"


def test_calibrate_file_text_or_json_lines(bertrt_bin, default_model, tmp_path):
    """--calibrate: one text per line or JSON Lines; every fifth held out; --calibrate-samples
    takes the first N; a per-tensor method reports its name."""
    text = tmp_path / "texts.txt"
    text.write_text("\n".join(CORPUS[:30]) + "\n\n", encoding="utf-8")
    jsonl = tmp_path / "texts.jsonl"
    jsonl.write_text("\n".join(json.dumps({"text": t}) for t in CORPUS[:30]), encoding="utf-8")
    for path in (text, jsonl):
        _, out, err = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "int8",
                                             "--calibrate", str(path)], [{"text": "hello"}])
        assert "on 24 sequences" in err and "against fp32 on 6 held-out" in err, err
        assert "built-in corpus" not in err and len(out) == 1
    _, _, err = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "int8",
                                       "--calibrate", str(text), "--calibrate-samples", "10",
                                       "--calibration", "p99.99"], [{"text": "hello"}])
    assert "calibrated (percentile 99.99, SmoothQuant 0.5) on 8 sequences" in err, err


def test_bad_calibration_arguments_are_usage_errors(bertrt_bin, default_model, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"nope": 1}\n', encoding="utf-8")
    for args, says in ((["--calibration", "p30"], "expected token, max, mse or pNN"),
                       (["--calibrate", str(bad)], "line 2"),
                       (["--calibrate", str(tmp_path / "missing.txt")], "missing.txt")):
        proc = subprocess.run([bertrt_bin, "run", default_model, "--precision", "int8", *args],
                              input=b'{"text": "x"}\n', capture_output=True, timeout=300)
        assert proc.returncode == 2 and says in proc.stderr.decode(), (args, proc.stderr)

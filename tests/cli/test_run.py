"""`bertrt run` as a pipeline over large inputs: a file or stdin, JSON Lines or plain text,
JSON Lines or .npy out, results in input order whatever the batching and the threads, bad
lines answered in place, a progress line on a terminal only."""
import json
import os
import pty
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run_jsonl

MODELS = ROOT / "tests/data/models"
CORPUS = [json.loads(line)["text"] for line in
          (ROOT / "tests/data/tokenizer/corpus.jsonl").read_text(encoding="utf-8").split("\n") if line]


def texts(n):
    """n texts of mixed lengths and scripts: the corpus over and over, each line numbered so
    that a misplaced result shows."""
    return [f"{i}: {CORPUS[i % len(CORPUS)]}" for i in range(n)]


def test_results_keep_the_input_order_whatever_the_batching(bertrt_bin, default_model):
    records = [{"text": t} for t in texts(300)]
    _, want, _ = run_jsonl(bertrt_bin, ["run", default_model, "--batch-size", "1", "--workers", "1"],
                           records)
    for args in (["--batch-size", "7", "--workers", "3"], ["--batch-size", "64", "--workers", "8"]):
        _, got, _ = run_jsonl(bertrt_bin, ["run", default_model, *args], records)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert np.allclose(g["embedding"], w["embedding"], atol=1e-5), (args, i)


def test_text_file_input(bertrt_bin, default_model, tmp_path):
    """--input-format text: each line is a text (a \\r before the \\n dropped); an empty line
    gets an error record in its place, the rest run, exit 1; the same vectors as JSON Lines."""
    lines = ["hello world", "中国人 café résumé", "", "tab\tand spaces  here"]
    path = tmp_path / "in.txt"
    path.write_bytes("\r\n".join(lines).encode() + b"\r\n")
    proc = subprocess.run([bertrt_bin, "run", default_model, str(path), "--input-format", "text"],
                          capture_output=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    got = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert len(got) == 4 and "empty text" in got[2]["error"] and got[2]["error"].startswith("line 3:")
    _, want, _ = run_jsonl(bertrt_bin, ["run", default_model], [{"text": t} for t in lines if t])
    for g, w in zip([g for g in got if "embedding" in g], want):
        assert np.allclose(g["embedding"], w["embedding"], atol=1e-6)
    missing = subprocess.run([bertrt_bin, "run", default_model, str(tmp_path / "nope.txt")],
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and "nope.txt" in missing.stderr


def test_output_npy(bertrt_bin, default_model, tmp_path):
    """--output-npy: numpy opens it; row i is line i's embedding; a failed line is a row of
    NaN with its error on stderr (exit 1); nothing on stdout."""
    records = [{"text": t} for t in texts(150)]
    records[40] = {"text": ""}
    records[99] = "not json"
    out = tmp_path / "emb.npy"
    code, stdout_records, stderr = run_jsonl(bertrt_bin, ["run", default_model, "--output-npy",
                                                          str(out), "--batch-size", "16"],
                                             records, check_exit=None)
    assert code == 1 and stdout_records == []
    assert "line 41:" in stderr and "line 100:" in stderr
    got = np.load(out)
    assert got.shape == (150, 384) and got.dtype == np.float32
    assert np.isnan(got[40]).all() and np.isnan(got[99]).all()
    ok = [i for i in range(150) if i not in (40, 99)]
    _, want, _ = run_jsonl(bertrt_bin, ["run", default_model], [records[i] for i in ok])
    assert np.allclose(got[ok], np.array([w["embedding"] for w in want]), atol=1e-6)
    # Per-token outputs have no one-vector-per-line form.
    proc = subprocess.run([bertrt_bin, "run", str(MODELS / "token_cls"), "--output-npy",
                           str(tmp_path / "x.npy")], input=b'{"text": "a"}\n', capture_output=True)
    assert proc.returncode == 2 and b"per token" in proc.stderr


def test_every_head_through_the_pipeline(bertrt_bin):
    """Each head's record as before the pipeline: label + logits, per-token logits, QA's two
    outputs (goldens: HF transformers)."""
    for model in ("seq_cls", "token_cls", "qa", "base"):
        golden = json.loads((MODELS / model / "golden.json").read_text())
        records = [{k: v for k, v in x.items() if k in ("text", "text_pair")}
                   for x in golden["inputs"]]
        _, out, _ = run_jsonl(bertrt_bin, ["run", str(MODELS / model), "--batch-size", "2"], records)
        for got, want in zip(out, golden["inputs"]):
            for name in ("logits", "start_logits", "end_logits", "pooler_output"):
                if name in want:
                    assert np.allclose(got[name], want[name], atol=1e-4 * max(1, np.abs(want[name]).max()))
            if model == "seq_cls":
                assert got["label"] in json.loads((MODELS / model / "config.json").read_text())[
                    "id2label"].values()


def test_model_without_pooler_needs_hidden_states(bertrt_bin, tmp_path):
    from safetensors.numpy import load_file, save_file
    model = tmp_path / "no_pooler"
    shutil.copytree(MODELS / "base", model)
    weights = load_file(model / "model.safetensors")
    save_file({k: v for k, v in weights.items() if "pooler" not in k}, model / "model.safetensors")
    proc = subprocess.run([bertrt_bin, "run", str(model)], input=b'{"text": "a"}\n',
                          capture_output=True, text=False)
    assert proc.returncode == 2 and b"--output last_hidden_state" in proc.stderr
    _, out, _ = run_jsonl(bertrt_bin, ["run", str(model), "--output", "last_hidden_state"],
                          [{"text": "a"}])
    assert len(out[0]["last_hidden_state"]) == 3  # [CLS] a [SEP]


def test_progress_line_on_a_terminal_only(bertrt_bin, default_model, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts(200)))
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([bertrt_bin, "run", default_model, str(path)], stdout=subprocess.PIPE,
                              stderr=terminal, timeout=300)
        os.close(terminal)
        shown = b""
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:
                break
            if not data:
                break
            shown += data
    finally:
        os.close(controller)
    assert proc.returncode == 0
    assert b"run: 200 texts" in shown and b"texts/s" in shown, shown
    quiet = subprocess.run([bertrt_bin, "run", default_model, str(path), "--quiet"],
                           capture_output=True, timeout=300)
    assert b"texts/s" not in quiet.stderr
    piped = subprocess.run([bertrt_bin, "run", default_model, str(path)], capture_output=True,
                           timeout=300)
    assert b"texts/s" not in piped.stderr and len(piped.stdout.splitlines()) == 200


def test_a_cut_input_is_noted_once(bertrt_bin):
    """run cuts what the model cannot take (the server refuses it unless asked): stderr says
    so, once, naming the first line cut."""
    model = str(ROOT / "tests/data/models/seq_cls")  # 64 tokens
    long = {"text": "word " * 100}
    _, out, err = run_jsonl(bertrt_bin, ["run", model], [{"text": "short"}, long, long])
    assert len(out) == 3 and all("logits" in o for o in out)
    assert err.count("left out") == 1 and "line 2:" in err and "64" in err, err
    _, _, err = run_jsonl(bertrt_bin, ["run", model], [{"text": "short"}])
    assert "left out" not in err

"""Reduced precision on the CPU. `--precision int8`: the encoder's GEMMs in int8, calibrated
at load on the built-in corpus or on --calibrate FILE (or once, into an int8 plan), with an
accuracy report against fp32 and embeddings close to fp32's (the default model, trained
weights: what the report's budget holds it to). `--precision bf16`: the same GEMMs in bf16."""
import json
import subprocess

import numpy as np
import pytest

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
    assert "int8 GEMMs in 22 of 24 Linears, calibrated (per token, SmoothQuant 0.5)" in err, err
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


def build_int8_plan(bertrt_bin, model, plan, *extra, precision="int8"):
    proc = subprocess.run([bertrt_bin, "build", model, "--precision", precision, "-o", str(plan),
                           *extra], capture_output=True, timeout=600)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def test_int8_plan_runs_as_built_and_says_so(bertrt_bin, default_model, tmp_path):
    """`build --precision int8` writes the 8-bit weights, their scales and the report: the plan
    answers exactly as the directory quantized at load on the same texts, without
    calibrating, is smaller than the fp32 plan, shows its report in `inspect` and reproduces
    the build machine's answers at load; the GPU and other precisions are refused."""
    plan = tmp_path / "int8.plan"
    code, out, err = build_int8_plan(bertrt_bin, default_model, plan)
    assert code == 0, err
    assert "quantize: int8 GEMMs in 22 of 24 Linears" in out and "verify: 7 samples" in out, out
    records = [{"text": t} for t in CORPUS[:12]]
    _, from_dir, _ = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "int8"], records)
    _, from_plan, err = run_jsonl(bertrt_bin, ["run", str(plan)], records)
    assert from_plan == from_dir, "an int8 plan answers as the model quantized at load"
    assert "calibrating" not in err and "built-in corpus" not in err, err
    assert "int8 check: the answers of the engine that quantized the model reproduced" in err, err
    fp32_plan = tmp_path / "fp32.plan"
    subprocess.run([bertrt_bin, "build", default_model, "-o", str(fp32_plan), "--skip-verify"],
                   check=True, capture_output=True, timeout=600)
    # The encoder's Linears in a quarter of the bytes (embeddings stay fp32).
    saved = fp32_plan.stat().st_size - plan.stat().st_size
    assert saved >= 0.7 * 4 * 6 * (4 * 384 * 384 + 2 * 384 * 1536) * 3 / 4, saved
    info = json.loads(subprocess.run([bertrt_bin, "inspect", str(plan), "--json"], check=True,
                                     capture_output=True, timeout=300).stdout)["plan"]
    assert info["precision"] == "int8" and info["int8"]["quantized_linears"] == 22, info
    assert info["int8"]["outputs"][0]["output"] == "embedding" and info["int8"]["within_budget"]
    text = subprocess.run([bertrt_bin, "inspect", str(plan)], check=True, capture_output=True,
                          timeout=300).stdout.decode()
    assert "int8 GEMMs in 22 of 24 Linears" in text and "top-10 overlap" in text, text
    proc = subprocess.run([bertrt_bin, "run", str(plan), "--precision", "fp16"],
                          input=b'{"text": "x"}\n', capture_output=True, timeout=300)
    assert proc.returncode != 0 and "is an int8 plan" in proc.stderr.decode(), proc.stderr


def test_int8_plan_of_a_classifier_keeps_the_heads_in_fp32(bertrt_bin, tmp_path):
    """A pooler + classifier model: the pooler and classifier stay fp32 (only the 8 encoder
    Linears are int8), the plan's logits equal the directory's at load."""
    model = str(ROOT / "tests/data/models/seq_cls")
    plan = tmp_path / "cls.plan"
    code, out, err = build_int8_plan(bertrt_bin, model, plan, "--calibrate-samples", "40")
    assert code == 0, err
    records = [{"text": t} for t in CORPUS[:8]]
    _, want, _ = run_jsonl(bertrt_bin, ["run", model, "--precision", "int8",
                                        "--calibrate-samples", "40"], records)
    _, got, _ = run_jsonl(bertrt_bin, ["run", str(plan)], records)
    assert got == want
    info = json.loads(subprocess.run([bertrt_bin, "inspect", str(plan), "--json"], check=True,
                                     capture_output=True, timeout=300).stdout)["plan"]["int8"]
    assert info["linears"] == info["quantized_linears"] + len(info["kept_fp32"]), info
    assert info["outputs"][0]["output"] == "logits" and info["outputs"][0]["argmax_agreement"] >= 0


def test_int8_report_of_question_answering_compares_answer_spans(bertrt_bin):
    """Question answering's start and end logits are one value per token: the report compares
    them per sequence (where the span starts and ends), and how often the whole span agrees."""
    model = str(ROOT / "tests/data/models/qa")
    _, out, err = run_jsonl(bertrt_bin, ["run", model, "--precision", "int8"],
                            [{"text": "who did it", "text_pair": "someone did it"}])
    assert len(out) == 1 and "start_logits" in out[0], out
    for line in ("start_logits: cosine", "end_logits: cosine", "answer span: cosine"):
        assert line in err, err
    assert "argmax agreement" in err and "of 18 rows" in err, err


def test_accuracy_budget_puts_linears_back_to_fp32(bertrt_bin, default_model, tmp_path):
    """A budget tighter than int8 gives: the costliest Linears go back to fp32, one at a time,
    until it holds, and the report names them; a budget only fp32 meets keeps none in int8
    (the build says so)."""
    _, _, err = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "int8",
                                       "--accuracy-budget", "cosine_mean=0.9995"],
                          [{"text": "hello"}])
    assert "kept in fp32 to meet the accuracy budget: layer" in err, err
    assert "(within the budget)" in err, err
    assert "int8 GEMMs in 24 of 24" not in err, err
    plan = tmp_path / "strict.plan"
    code, out, err = build_int8_plan(bertrt_bin, default_model, plan, "--accuracy-budget",
                                     "cosine_min=1")
    assert code == 0 and "no Linear stays in int8" in err, (code, err)
    assert "int8 GEMMs in 0 of 24" in out, out
    for bad in ("cosine=0.9", "argmax=2", "argmax", "top10=x"):
        proc = subprocess.run([bertrt_bin, "run", default_model, "--precision", "int8",
                               "--accuracy-budget", bad], input=b'{"text": "x"}\n',
                              capture_output=True, timeout=300)
        assert proc.returncode == 2 and "--accuracy-budget" in proc.stderr.decode(), (bad, proc.stderr)


def test_bf16_gemms_stay_within_bf16_rounding_of_fp32(bertrt_bin, default_model):
    """bf16 GEMMs (AVX512_BF16): embeddings within the bound a bf16 engine is held to
    (cosine 0.999, CheckVerifyThresholds), and not fp32's own."""
    records = [{"text": t} for t in CORPUS[:40]]
    _, fp32, _ = run_jsonl(bertrt_bin, ["run", default_model], records)
    proc = subprocess.run([bertrt_bin, "run", default_model, "--precision", "bf16"],
                          input="".join(json.dumps(r) + "\n" for r in records).encode(),
                          capture_output=True, timeout=300)
    if proc.returncode != 0 and b"AVX512_BF16" in proc.stderr:
        pytest.skip(proc.stderr.decode())
    assert proc.returncode == 0, proc.stderr
    bf16 = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    c = cosines([r["embedding"] for r in bf16], [r["embedding"] for r in fp32])
    assert c.min() >= 0.999, c.min()
    assert c.max() < 1.0 - 1e-7, "the bf16 GEMMs ran"


def test_fp8_is_emulated_on_the_cpu_calibrated_reported_and_planned(bertrt_bin, default_model,
                                                                    tmp_path):
    """`--precision fp8` on the CPU: the encoder's GEMMs with both operands rounded to FP8 E4M3
    (one scale per tensor, calibrated with max by default), fp32 arithmetic, as the GPU's FP8
    tensor cores compute; said to be emulated. The budget holds (Linears back to fp32 as
    needed); `build --precision fp8` stores E4M3 weights and the report, and the plan answers
    as the directory quantized at load. Per-token calibration is int8's alone."""
    records = [{"text": t} for t in CORPUS[:24]]
    _, fp32, _ = run_jsonl(bertrt_bin, ["run", default_model], records)
    _, fp8, err = run_jsonl(bertrt_bin, ["run", default_model, "--precision", "fp8"], records)
    assert "fp8 on the CPU is emulated" in err and "calibrated (max) on 74 sequences" in err, err
    assert "(within the budget)" in err, err
    c = cosines([r["embedding"] for r in fp8], [r["embedding"] for r in fp32])
    assert c.mean() >= 0.998 and c.min() >= 0.99, (c.mean(), c.min())
    assert c.max() < 1.0 - 1e-7, "the fp8 GEMMs ran"
    plan = tmp_path / "fp8.plan"
    code, out, err = build_int8_plan(bertrt_bin, default_model, plan, precision="fp8")
    assert code == 0, err
    assert "quantize: fp8 GEMMs in" in out and "verify: 7 samples" in out, out
    _, from_plan, err = run_jsonl(bertrt_bin, ["run", str(plan)], records)
    assert from_plan == fp8, "an fp8 plan answers as the model quantized at load"
    assert "fp8 check: the answers of the engine that quantized the model reproduced" in err, err
    info = json.loads(subprocess.run([bertrt_bin, "inspect", str(plan), "--json"], check=True,
                                     capture_output=True, timeout=300).stdout)["plan"]
    assert info["precision"] == "fp8" and info["fp8"]["calibration"] == "max", info
    proc = subprocess.run([bertrt_bin, "run", default_model, "--precision", "fp8",
                           "--calibration", "token"], input=b'{"text": "x"}\n',
                          capture_output=True, timeout=300)
    assert proc.returncode == 2 and "token is int8's" in proc.stderr.decode(), proc.stderr


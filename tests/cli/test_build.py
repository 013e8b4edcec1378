"""`bertrt build` end to end: the real binary builds plans from the tiny test
models, and run / tokenize / inspect / bench on a plan equal the HF directory."""
import json
import random
import shutil
import struct
import subprocess

import pytest

from conftest import ROOT, run_jsonl

MODELS = ROOT / "tests/data/models"
TEXTS = [
    {"text": "hello world"},
    {"text": "the quick brown fox", "text_pair": "jumps over the lazy dog"},
    {"text": "今天天气很好，东京とモスクワ"},
    {"text": "a much longer text " * 30},
]


def build(bertrt_bin, model, plan, *extra, check=0):
    proc = subprocess.run([bertrt_bin, "build", str(MODELS / model), "-o", str(plan), *extra],
                          capture_output=True, text=True, timeout=300)
    if check is not None:
        assert proc.returncode == check, proc.stderr
    return proc


# st_*: concatenated pooling, Dense modules, prompts, truncate_dim and include_prompt travel
# in the plan.
# The other families: their structure (position offset, no token types, the
# classifier's activation, MPNet's relative position bias) travels in the plan too,
# as do SPLADE's masked-LM head (its decoder tied: not stored twice) and pooling options,
# and ModernBERT's structure (pre-LayerNorm, rotary thetas, GeGLU, local window, no
# position table, the prediction head's LayerNorm).
@pytest.mark.parametrize("model", ["seq_cls", "token_cls", "qa", "sentence_mean", "sentence_cls",
                                   "base", "st_concat_prompts", "st_legacy_concat",
                                   "st_exclude_prompt", "roberta_seq_cls", "xlmr_qa",
                                   "xlmr_sentence_mean", "distilbert_seq_cls",
                                   "distilbert_token_cls", "mpnet_sentence_mean",
                                   "splade_bert", "splade_st_sum", "modernbert_seq_cls",
                                   "modernbert_reranker", "modernbert_sentence_mean",
                                   "modernbert_qa"])
def test_plan_serves_exactly_like_the_directory(bertrt_bin, tmp_path, model):
    plan = tmp_path / f"{model}.plan"
    proc = build(bertrt_bin, model, plan)
    for stage in ("load", "convert", "write", "verify"):
        assert f"[build] {stage} done" in proc.stderr
    assert "max abs diff 0 " in proc.stdout
    prompts = {"st_concat_prompts": [["run", "--prompt-name", "passage"]],
               "st_exclude_prompt": [["run", "--prompt-name", "short"]]}.get(model, [])
    # Batches of one: `run` joins lines into batches as they come, and the CPU
    # GEMM's threads split a batch by its size, so two runs that batch the
    # same lines differently round differently in the last bit.
    one = ["--batch-size", "1"]
    for command in (["run", *one], ["tokenize"], ["run", *one, "--output", "last_hidden_state"],
                    *[p + one for p in prompts]):
        _, want, _ = run_jsonl(bertrt_bin, [command[0], str(MODELS / model), *command[1:]], TEXTS)
        _, got, _ = run_jsonl(bertrt_bin, [command[0], str(plan), *command[1:]], TEXTS)
        assert got == want, command


def test_inspect_on_a_plan(bertrt_bin, tmp_path):
    plan = tmp_path / "seq_cls.plan"
    build(bertrt_bin, "seq_cls", plan, "--max-seq-len", "32")
    want = json.loads(subprocess.run([bertrt_bin, "inspect", str(MODELS / "seq_cls"), "--json"],
                                     capture_output=True, text=True, check=True).stdout)
    got = json.loads(subprocess.run([bertrt_bin, "inspect", str(plan), "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    info = got.pop("plan")
    assert info["format_version"] == 1 and info["precision"] == "fp32"
    assert info["source"] == str(MODELS / "seq_cls")
    assert info["source_checksum"].startswith("crc32c:")
    # A plan's weights are the plan's; what they were read from is the plan's metadata.
    assert info["source_weights_format"] == want.pop("weights_format") == "safetensors"
    assert got["max_seq_length"] == 32
    for key in ("source", "max_seq_length"):
        got.pop(key), want.pop(key)
    assert got == want


def test_bench_takes_a_plan(bertrt_bin, tmp_path):
    plan = tmp_path / "qa.plan"
    build(bertrt_bin, "qa", plan)
    proc = subprocess.run([bertrt_bin, "bench", str(plan), "--seq-len", "16", "--iterations", "2",
                           "--warmup", "1", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_plans_verify_and_serve_on_cpu(bertrt_bin, tmp_path, precision):
    plan = tmp_path / f"{precision}.plan"
    proc = build(bertrt_bin, "sentence_mean", plan, "--precision", precision)
    assert "min cosine" in proc.stdout
    code, out, err = run_jsonl(bertrt_bin, ["run", str(plan)], TEXTS)
    assert "widened to fp32" in err
    assert len(out) == len(TEXTS) and all("embedding" in r for r in out)


def test_samples_file(bertrt_bin, tmp_path):
    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"text": "one"}\n{"text": "two", "text_pair": "three"}\n')
    proc = build(bertrt_bin, "seq_cls", tmp_path / "p.plan", "--samples", str(samples))
    assert "verify: 2 samples" in proc.stdout
    samples.write_text('{"nope": 1}\n')
    proc = build(bertrt_bin, "seq_cls", tmp_path / "q.plan", "--samples", str(samples), check=2)
    assert "expected {" in proc.stderr


def test_cuda_without_a_gpu_builds_and_verifies_on_cpu(bertrt_bin, tmp_path):
    plan = tmp_path / "cuda.plan"
    proc = build(bertrt_bin, "token_cls", plan, "--device", "cuda")
    if "without a usable GPU" not in proc.stderr:
        pytest.skip("this machine has a GPU")
    info = json.loads(subprocess.run([bertrt_bin, "inspect", str(plan), "--json"],
                                     capture_output=True, text=True, check=True).stdout)["plan"]
    assert info["device"] == "cuda" and info["precision"] == "fp16"
    # Nothing was timed: CUDA engines will take cuBLASLt's heuristic, and the
    # build said so.
    assert info["tuned_on_gpu"] == "" and info["gemm_choices"] == 0
    assert "no timed GEMM choices" in proc.stderr


def fragile_model(tmp_path):
    """A copy of sentence_mean whose word embeddings are 1 + tiny noise (and
    no position/type embeddings): fp32 LayerNorm amplifies the noise into the
    signal, while bf16 rounds every value to 1, so a bf16 plan is far off."""
    src = tmp_path / "fragile"
    shutil.copytree(MODELS / "sentence_mean", src)
    path = src / "model.safetensors"
    data = bytearray(path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    rng = random.Random(0)
    for name, value in (("word_embeddings", None), ("position_embeddings", 0.0),
                        ("token_type_embeddings", 0.0)):
        entry = header[f"embeddings.{name}.weight"]
        begin, end = (8 + n + o for o in entry["data_offsets"])
        count = (end - begin) // 4
        values = [value if value is not None else 1.0 + rng.gauss(0, 1e-3) for _ in range(count)]
        data[begin:end] = struct.pack(f"<{count}f", *values)
    path.write_bytes(bytes(data))
    return src


def test_failed_verification_removes_the_plan_unless_forced(bertrt_bin, tmp_path):
    src = fragile_model(tmp_path)
    plan = tmp_path / "p.plan"
    proc = subprocess.run([bertrt_bin, "build", str(src), "-o", str(plan), "--precision", "bf16"],
                          capture_output=True, text=True)
    assert proc.returncode == 5, proc.stderr
    assert "verification failed" in proc.stderr and "removed" in proc.stderr
    assert not plan.exists()
    proc = subprocess.run([bertrt_bin, "build", str(src), "-o", str(plan), "--precision", "bf16",
                           "--force"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "plan kept because of --force" in proc.stderr
    assert plan.exists()
    # The fp32 plan of the same model is exact.
    build_proc = subprocess.run([bertrt_bin, "build", str(src), "-o", str(plan)],
                                capture_output=True, text=True)
    assert build_proc.returncode == 0, build_proc.stderr


def test_bad_arguments(bertrt_bin, tmp_path):
    plan = tmp_path / "p.plan"
    build(bertrt_bin, "seq_cls", plan)
    proc = build(bertrt_bin, "seq_cls", tmp_path / "x.plan", "--max-seq-len", "100000", check=2)
    assert "position embeddings" in proc.stderr
    proc = subprocess.run([bertrt_bin, "build", str(plan), "-o", str(tmp_path / "y.plan")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "already a plan" in proc.stderr
    proc = build(bertrt_bin, "seq_cls", tmp_path / "z.plan", "--device", "tpu", check=None)
    assert proc.returncode != 0
    proc = subprocess.run([bertrt_bin, "build", str(tmp_path / "missing"), "-o",
                           str(tmp_path / "m.plan")], capture_output=True, text=True)
    assert proc.returncode == 3


@pytest.mark.parametrize("damage", ["truncate", "flip_tensor", "flip_table", "version"])
def test_damaged_plans_are_refused_with_the_rebuild_command(bertrt_bin, tmp_path, damage):
    plan = tmp_path / "p.plan"
    build(bertrt_bin, "seq_cls", plan)
    data = bytearray(plan.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip_tensor":
        data[len(data) // 2] ^= 0x01
    elif damage == "flip_table":
        data[-100] ^= 0x01
    else:
        data[8] = 9
    plan.write_bytes(bytes(data))
    for command in ("run", "tokenize", "inspect"):
        code, out, err = run_jsonl(bertrt_bin, [command, str(plan)], TEXTS[:1], check_exit=None)
        assert code == 3, (command, err)
        assert "rebuild with: bertrt build" in err
    if damage == "version":
        assert "plan format version 9" in err and "reads plan format version 1" in err

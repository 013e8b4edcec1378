"""The bertrt CLI end to end: the real binary on the real default model."""
import json
import math
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_jsonl

GOLDEN = json.loads((ROOT / "tests/data/default_model/golden.json").read_text())


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.mark.parametrize("command", ["", "tokenize", "run", "inspect", "bench"])
def test_help_on_every_command(bertrt_bin, command):
    proc = subprocess.run([bertrt_bin, *([command] if command else []), "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert "Usage" in proc.stdout or "usage" in proc.stdout.lower()


def test_no_subcommand_is_a_usage_error(bertrt_bin):
    assert subprocess.run([bertrt_bin], capture_output=True).returncode != 0


def test_an_unknown_command_lists_the_commands(bertrt_bin):
    proc = subprocess.run([bertrt_bin, "frobnicate"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert 'unknown command "frobnicate"; the commands are tokenize, run, inspect, bench, build, serve' \
        in proc.stderr


def test_a_hub_id_as_model_says_to_download_it(bertrt_bin):
    proc = subprocess.run([bertrt_bin, "inspect", "BAAI/bge-small-en-v1.5"], capture_output=True, text=True)
    assert proc.returncode == 3
    assert "bertrt reads local files only" in proc.stderr
    assert "hf download BAAI/bge-small-en-v1.5 --local-dir models/bge-small-en-v1.5" in proc.stderr


@pytest.mark.parametrize("command", ["run", "tokenize", "inspect", "bench"])
def test_every_command_words_a_bad_model_path_alike(bertrt_bin, command):
    """A missing path and a file that is no model get the same one-line error from every
    command that reads a model, and exit 3 (a model error)."""
    for path, words in (("/no/such/model", "error: /no/such/model: no such file or directory"),
                        (str(ROOT / "README.md"), "README.md is a file, not a model: expected a "
                         "Hugging Face model folder, a plan file")):
        proc = subprocess.run([bertrt_bin, command, path], input="hello\n", capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 3, (command, path, proc.returncode, proc.stderr)
        assert words in proc.stderr, (command, proc.stderr)
        assert proc.stderr.startswith("error: "), (command, proc.stderr)


def test_plain_text_piped_into_run_gets_the_hint_once(bertrt_bin, default_model):
    code, out, _ = run_jsonl(bertrt_bin, ["run", default_model], ["hello world", "second text"], check_exit=1)
    assert out[0]["error"].endswith("if INPUT holds one text per line, add --input-format text")
    assert "--input-format" not in out[1]["error"]


def test_default_model_matches_sentence_transformers(bertrt_bin, default_model):
    records = [{"text": t} for t in GOLDEN["texts"]]
    _, out, _ = run_jsonl(bertrt_bin, ["run", default_model, "--batch-size", "5"], records)
    assert len(out) == len(records)
    for got, want in zip(out, GOLDEN["embeddings"]):
        emb = got["embedding"]
        assert len(emb) == len(want)
        assert cosine(emb, want) > 0.99999
        assert max(abs(a - b) for a, b in zip(emb, want)) < 1e-4


def test_default_model_token_ids_match_hf(bertrt_bin, default_model):
    records = [{"text": t} for t in GOLDEN["texts"]]
    _, out, _ = run_jsonl(bertrt_bin, ["tokenize", default_model, "--max-length",
                                       str(GOLDEN["max_seq_length"])], records)
    assert [o["input_ids"] for o in out] == GOLDEN["input_ids"]


def test_batched_equals_one_at_a_time(bertrt_bin, default_model):
    records = [{"text": t} for t in GOLDEN["texts"][:8]]
    _, batched, _ = run_jsonl(bertrt_bin, ["run", default_model, "--batch-size", "8"], records)
    _, single, _ = run_jsonl(bertrt_bin, ["run", default_model, "--batch-size", "1"], records)
    for a, b in zip(batched, single):
        assert max(abs(x - y) for x, y in zip(a["embedding"], b["embedding"])) < 1e-6


def test_bad_lines_get_error_records_and_the_rest_run(bertrt_bin, default_model):
    records = [
        {"text": "first"},
        "this is not json",
        {"no_text": 1},
        {"text": 5},
        {"text": "a", "text_pair": ["x"]},
        {"text": ""},  # the server's rule too: an empty text is refused
        {"text": "last", "text_pair": "pair"},
    ]
    code, out, _ = run_jsonl(bertrt_bin, ["run", default_model], records, check_exit=None)
    assert code == 1
    assert len(out) == len(records)
    assert "embedding" in out[0] and "embedding" in out[6]
    for i in range(1, 6):
        assert "error" in out[i] and out[i]["error"].startswith(f"line {i + 1}:")
    assert "empty text" in out[5]["error"]


def test_invalid_utf8_is_an_error_record(bertrt_bin, default_model):
    proc = subprocess.run([bertrt_bin, "tokenize", default_model],
                          input=b'{"text": "ok"}\n{"text": "bad \xff byte"}\n{"text": "ok"}\n',
                          capture_output=True)
    assert proc.returncode == 1
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(lines) == 3 and "input_ids" in lines[0] and "input_ids" in lines[2]
    assert "error" in lines[1]


def test_missing_model_exits_3(bertrt_bin, tmp_path):
    proc = subprocess.run([bertrt_bin, "run", str(tmp_path / "nope")], input=b"", capture_output=True)
    assert proc.returncode == 3
    assert b"error" in proc.stderr


def test_each_failure_class_has_its_own_exit_code(bertrt_bin, default_model):
    """fp16 on the CPU is the user's to change (2, as a bad flag); a taken port is 6; --help
    lists the codes."""
    proc = subprocess.run([bertrt_bin, "run", default_model, "--precision", "fp16"],
                          input='{"text": "x"}\n', capture_output=True, text=True)
    assert proc.returncode == 2 and "the CPU engine runs fp32, bf16, int8 or fp8 (emulated)" in proc.stderr
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([bertrt_bin, "serve", default_model, "--http-port", str(port), "--grpc-port", "0",
                               "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 6 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr, proc.stderr
    for command in ([], ["serve"], ["run"]):
        out = subprocess.run([bertrt_bin, *command, "--help"], capture_output=True, text=True).stdout
        assert "Exit codes: 0 success;" in out and "6 a port to listen on" in out


def test_cuda_without_gpu_says_so(bertrt_bin, default_model):
    proc = subprocess.run([bertrt_bin, "run", default_model, "--device", "cuda"],
                          input='{"text": "x"}\n', capture_output=True, text=True)
    assert proc.returncode == 4
    assert "--device cuda" in proc.stderr


def test_startup_trace_names_each_step_in_order(bertrt_bin, default_model):
    env = dict(os.environ, BERTRT_TRACE_STARTUP="1")
    proc = subprocess.run([bertrt_bin, "run", default_model], input='{"text": "x"}\n',
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    steps = re.findall(r"^\[startup \+([0-9.]+) ms\] (.*)$", proc.stderr, re.M)
    assert [what for _, what in steps] == [
        "bertrt run: started", "bertrt run: model read and checked", "bertrt run: engine created",
        "bertrt run: results of a chunk"]
    times = [float(t) for t, _ in steps]
    assert times == sorted(times) and 0 < times[-1] < 60_000
    # Off by default.
    quiet = subprocess.run([bertrt_bin, "run", default_model], input='{"text": "x"}\n',
                           capture_output=True, text=True)
    assert "[startup" not in quiet.stderr


def test_max_length_truncates(bertrt_bin, default_model):
    _, out, _ = run_jsonl(bertrt_bin, ["tokenize", default_model, "--max-length", "5"],
                          [{"text": "one two three four five six seven"}])
    assert len(out[0]["input_ids"]) == 5


def test_bench_json_fields(bertrt_bin, default_model):
    proc = subprocess.run([bertrt_bin, "bench", default_model, "--batch-size", "2", "--seq-len", "16",
                           "--iterations", "3", "--warmup", "1", "--threads", "1", "--json"],
                          capture_output=True, text=True, check=True)
    res = json.loads(proc.stdout)
    for key in ["batch_size", "seq_len", "iterations", "median_ms", "p90_ms", "p99_ms",
                "seq_per_s", "tokens_per_s", "peak_memory_bytes"]:
        assert key in res
    assert res["batch_size"] == 2 and res["seq_len"] == 16 and res["median_ms"] > 0


def test_bench_profile_needs_cuda(bertrt_bin, default_model):
    proc = subprocess.run([bertrt_bin, "bench", default_model, "--profile", "--seq-len", "16"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--device cuda" in proc.stderr, proc.stderr


def test_bench_ragged_lengths(bertrt_bin, default_model):
    proc = subprocess.run([bertrt_bin, "bench", default_model, "--batch-size", "4", "--lengths", "3:40",
                           "--iterations", "2", "--warmup", "0", "--json"],
                          capture_output=True, text=True, check=True)
    res = json.loads(proc.stdout)
    assert res["lengths"] == "3:40" and 4 * 3 <= res["total_tokens"] <= 4 * 40
    drawn = res["sequence_lengths"]
    assert len(drawn) == 4 and sum(drawn) == res["total_tokens"] and all(3 <= n <= 40 for n in drawn)


def test_inspect_default_model(bertrt_bin, default_model):
    proc = subprocess.run([bertrt_bin, "inspect", default_model], capture_output=True, text=True)
    assert proc.returncode == 0
    text = proc.stdout.lower()
    assert "384" in text and "mean" in text


@pytest.mark.parametrize("command", ["run", "serve"])
def test_gpu_self_check_can_be_skipped(bertrt_bin, command):
    help_text = subprocess.run([bertrt_bin, command, "--help"], capture_output=True,
                               text=True).stdout
    assert "--skip-verify" in help_text and "self-check" in help_text


def test_cpu_runs_have_no_self_check(bertrt_bin, default_model):
    proc = subprocess.run([bertrt_bin, "run", default_model], input='{"text": "hi"}\n',
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "self-check" not in proc.stderr, proc.stderr


def test_default_cuda_build_has_code_for_hopper_and_older_gpus(bertrt_bin):
    """The build's CUDA architectures (CMakeLists.txt) are sm_75..sm_90a machine code
    and sm_90 PTX. CMake used to cache the compiler's default instead (compute_75 with
    CUDA 13), and an H200 then ran every kernel as sm_75 code: tensor-core attention
    with an empty body, launches overlapped with no kernel waiting (issue 24)."""
    cache = Path(bertrt_bin).parent / "CMakeCache.txt"
    if not cache.exists():
        pytest.skip("bertrt was not built by CMake here")
    entries = dict(line.split("=", 1) for line in cache.read_text().splitlines()
                   if "=" in line and not line.startswith(("//", "#")))
    if "CMAKE_CUDA_ARCHITECTURES:STRING" not in entries:
        pytest.skip("built without the CUDA backend")
    archs = entries["CMAKE_CUDA_ARCHITECTURES:STRING"].split(";")
    assert archs == ["75-real", "80-real", "86-real", "89-real", "90a-real", "90-virtual"], archs


def test_a_missing_module_folder_is_named(bertrt_bin, tmp_path):
    """A sentence-transformers folder copied without its Pooling module's folder: the error
    names the module and the missing file (not a bare 'cannot open')."""
    import shutil
    model = tmp_path / "partial"
    shutil.copytree(ROOT / "tests/data/models/sentence_mean", model)
    shutil.rmtree(model / "1_Pooling")
    proc = subprocess.run([bertrt_bin, "run", str(model)], input='{"text": "hi"}\n',
                          capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert "names a Pooling module" in proc.stderr and "1_Pooling/config.json is missing" in proc.stderr


def test_a_masked_lm_with_a_pooling_module_says_one_thing(bertrt_bin, tmp_path):
    """all-mpnet-base-v2's folder: config.json says MPNetForMaskedLM, modules.json pools the
    tokens. One notice says what is served (sentence embeddings), none says SPLADE."""
    import shutil
    model = tmp_path / "mpnet"
    shutil.copytree(ROOT / "tests/data/models/mpnet_sentence_mean", model)
    config = json.loads((model / "config.json").read_text())
    config["architectures"] = ["MPNetForMaskedLM"]
    (model / "config.json").write_text(json.dumps(config))
    code, out, err = run_jsonl(bertrt_bin, ["run", str(model)], [{"text": "hi"}])
    assert "embedding" in out[0]
    assert "SPLADE" not in err and "served as sentence embeddings" in err and "masked-LM head" in err, err

"""pytorch_model.bin through the real binary: what `inspect` says it read, plans built
from it equal to plans built from the safetensors model, and hostile pickles refused
with exit code 3 and nothing executed.

The fixtures (tests/data/models/torch_*) were written by torch.save itself
(scripts/make_torch_checkpoints.py); tests/models/test_goldens.py checks their outputs
against transformers'. The hostile files are made here with Python's own pickle and
zipfile, which is how an attacker would make them.
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT, run_jsonl

MODELS = ROOT / "tests/data/models"
TEXTS = [{"text": "hello world"}, {"text": "The quick brown fox.", "text_pair": "jumps"}]


def inspect(bertrt_bin, path):
    proc = subprocess.run([bertrt_bin, "inspect", str(path), "--json"], capture_output=True, text=True)
    return proc


@pytest.mark.parametrize("name,fmt", [
    ("torch_seq_cls", "pytorch_model.bin (zip)"),
    ("torch_legacy_token_cls", "pytorch_model.bin (legacy)"),
    ("torch_sharded", "pytorch_model.bin (legacy, zip), 3 shards"),
    ("seq_cls", "safetensors"),
    ("sharded", "safetensors, 2 shards"),
])
def test_inspect_names_the_weights_format(bertrt_bin, name, fmt):
    proc = inspect(bertrt_bin, MODELS / name)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["weights_format"] == fmt
    text = subprocess.run([bertrt_bin, "inspect", str(MODELS / name)], capture_output=True, text=True)
    assert f"weights           {fmt}" in text.stdout


def test_plan_from_bin_runs_as_the_plan_from_safetensors(bertrt_bin, tmp_path):
    outs = []
    for name in ("torch_seq_cls", "seq_cls"):
        plan = tmp_path / f"{name}.plan"
        proc = subprocess.run([bertrt_bin, "build", str(MODELS / name), "-o", str(plan)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(run_jsonl(bertrt_bin, ["run", str(plan)], TEXTS)[1])
    assert outs[0] == outs[1]


# --- hostile pickles ---------------------------------------------------------------


class RunsACommand:
    """What an attacker pickles: unpickling calls os.system(command)."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class Evaluates:
    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return (eval, (self.code,))


def model_dir_with(tmp_path, write_bin):
    d = tmp_path / "model"
    shutil.copytree(MODELS / "seq_cls", d)
    (d / "model.safetensors").unlink()
    write_bin(d / "pytorch_model.bin")
    return d


def zip_bin(payload, compress=zipfile.ZIP_STORED):
    def write(path):
        with zipfile.ZipFile(path, "w", compression=compress) as z:
            z.writestr("archive/data.pkl", payload)
            z.writestr("archive/version", "3\n")
    return write


def legacy_bin(payload):
    def write(path):
        with open(path, "wb") as f:
            pickle.dump(0x1950A86A20F9469CFC6C, f, protocol=2)
            pickle.dump(1001, f, protocol=2)
            pickle.dump({"protocol_version": 1001, "little_endian": True,
                         "type_sizes": {"short": 2, "int": 4, "long": 4}}, f, protocol=2)
            f.write(payload)
            pickle.dump([], f, protocol=2)
    return write


@pytest.mark.parametrize("container", [zip_bin, legacy_bin], ids=["zip", "legacy"])
@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_that_runs_a_command_is_refused_and_nothing_runs(bertrt_bin, tmp_path,
                                                                 container, protocol):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"w": RunsACommand(f"touch {marker}")}, protocol=protocol)
    # The payload is real: Python's unpickler runs the command.
    probe = tmp_path / "probe"
    subprocess.run([sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                   input=payload.replace(str(marker).encode(), str(probe).encode()), check=True)
    assert probe.exists()

    d = model_dir_with(tmp_path, container(payload))
    for command in (["inspect", str(d)], ["run", str(d)], ["build", str(d), "-o", str(tmp_path / "p.plan")]):
        proc = subprocess.run([bertrt_bin, *command], input="{\"text\": \"hi\"}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 3, (command, proc.stderr)
        assert "posix.system" in proc.stderr and "runs nothing" in proc.stderr, proc.stderr
        assert not marker.exists()
    assert not (tmp_path / "p.plan").exists()


def test_eval_and_other_callables_are_refused_by_name(bertrt_bin, tmp_path):
    d = model_dir_with(tmp_path, zip_bin(pickle.dumps(Evaluates("1 + 1"), protocol=2)))
    proc = inspect(bertrt_bin, d)
    # Protocol 2 spells the builtins module as Python 2 did.
    assert proc.returncode == 3 and "__builtin__.eval" in proc.stderr, proc.stderr


def test_a_repacked_compressed_zip_is_refused_with_the_fix(bertrt_bin, tmp_path):
    def write(path):
        with zipfile.ZipFile(MODELS / "torch_seq_cls/pytorch_model.bin") as src, \
                zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as dst:
            for item in src.infolist():
                dst.writestr(item.filename, src.read(item.filename))
    proc = inspect(bertrt_bin, model_dir_with(tmp_path, write))
    assert proc.returncode == 3 and "compressed" in proc.stderr and "torch.save" in proc.stderr


def test_a_storage_key_that_leaves_the_archive_is_refused(bertrt_bin, tmp_path):
    with zipfile.ZipFile(MODELS / "torch_seq_cls/pytorch_model.bin") as src:
        pkl_name = next(n for n in src.namelist() if n.endswith("data.pkl"))
        data = src.read(pkl_name)
    # Storage keys are "0", "1", ...: make the first one point outside data/.
    hostile = data.replace(b"X\x01\x00\x00\x000", b"X\x04\x00\x00\x00../0", 1)
    assert hostile != data
    proc = inspect(bertrt_bin, model_dir_with(tmp_path, zip_bin(hostile)))
    assert proc.returncode == 3 and "is not a record name" in proc.stderr, proc.stderr


def test_a_truncated_bin_is_an_error(bertrt_bin, tmp_path):
    data = (MODELS / "torch_legacy_token_cls/pytorch_model.bin").read_bytes()
    for cut in (1, 100, len(data) // 2, len(data) - 1):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(MODELS / "torch_legacy_token_cls", d)
        (d / "pytorch_model.bin").write_bytes(data[:cut])
        proc = inspect(bertrt_bin, d)
        assert proc.returncode == 3, (cut, proc.stderr)

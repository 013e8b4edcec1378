#!/usr/bin/env python3
"""Write the pytorch_model.bin test models (tests/data/models/torch_*) with torch itself.

  python3 scripts/make_torch_checkpoints.py [OUT_DIR]

Needs torch and safetensors (the GPU machine has them; scripts/device_torch_fixtures.sh
runs this there). Each fixture is a tiny test model of tests/data/models whose
model.safetensors is replaced by what torch.save writes, in one of the forms users'
checkpoints come in: the zip format (PyTorch 1.6+, what save_pretrained wrote before
safetensors) and the legacy format (_use_new_zipfile_serialization=False, PyTorch
before 1.6), fp32 / fp16 / bf16, sharded with pytorch_model.bin.index.json, tensors
that share one storage and non-contiguous views, a sentence-transformers Dense module.
The weights are the source model's, so its golden.json (transformers' outputs on them)
is the fixture's too; each file is read back with torch.load(weights_only=True) and
compared with the source, tensor by tensor, before it is kept.
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "data", "models")


def copy_model(src, dst):
    """The source model's folder without its safetensors weights."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors", "*.safetensors.index.json"))


def source_weights(src):
    index = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(index):
        sd = {}
        for shard in sorted(set(json.load(open(index))["weight_map"].values())):
            sd.update(load_file(os.path.join(src, shard)))
        return sd
    return load_file(os.path.join(src, "model.safetensors"))


def check_same(path, want):
    got = torch.load(path, map_location="cpu", weights_only=True)
    for name, t in got.items():
        assert name in want, f"{path}: {name} not in the source"
        assert t.dtype == want[name].dtype and torch.equal(t, want[name]), f"{path}: {name} differs"
    return set(got)


def save(sd, path, legacy=False):
    torch.save(sd, path, _use_new_zipfile_serialization=not legacy)


def single(out, name, src_name, legacy=False):
    src, dst = os.path.join(MODELS, src_name), os.path.join(out, name)
    copy_model(src, dst)
    sd = source_weights(src)
    path = os.path.join(dst, "pytorch_model.bin")
    save(sd, path, legacy)
    assert check_same(path, sd) == set(sd)
    return dst


def sharded(out, name, src_name, shards=3):
    """As transformers' save_pretrained(safe_serialization=False, max_shard_size=...) wrote them."""
    src, dst = os.path.join(MODELS, src_name), os.path.join(out, name)
    copy_model(src, dst)
    sd = source_weights(src)
    names = list(sd)
    weight_map, seen = {}, set()
    for i in range(shards):
        part = {n: sd[n] for n in names[i::shards]}
        file = f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin"
        save(part, os.path.join(dst, file), legacy=(i == 1))  # one shard in each format
        weight_map.update({n: file for n in part})
        seen |= check_same(os.path.join(dst, file), sd)
    assert seen == set(sd)
    total = sum(t.numel() * t.element_size() for t in sd.values())
    with open(os.path.join(dst, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return dst


def views(out, name, src_name):
    """Storages shared between tensors and non-contiguous views, as torch.save keeps them:
    every 2-D weight transposed in memory (a view with strides (1, rows)), and every bias of
    a layer stored in one flat storage, each a view at its own offset."""
    src, dst = os.path.join(MODELS, src_name), os.path.join(out, name)
    copy_model(src, dst)
    sd = source_weights(src)
    biases = [n for n in sd if n.endswith(".bias")]
    flat = torch.cat([sd[n].reshape(-1) for n in biases])
    saved, offset = {}, 0
    for n in biases:
        k = sd[n].numel()
        saved[n] = flat[offset:offset + k].view(sd[n].shape)
        offset += k
    for n, t in sd.items():
        if n in saved:
            continue
        saved[n] = t.t().contiguous().t() if t.dim() == 2 else t
    assert any(not t.is_contiguous() for t in saved.values())
    path = os.path.join(dst, "pytorch_model.bin")
    save(saved, path, legacy=False)
    assert check_same(path, sd) == set(sd)
    return dst


def st_dense(out, name, src_name):
    """A sentence-transformers model as older versions saved it: pytorch_model.bin in the
    root and in the Dense module's folder."""
    dst = single(out, name, src_name)
    dense_src = os.path.join(MODELS, src_name, "2_Dense")
    sd = load_file(os.path.join(dense_src, "model.safetensors"))
    path = os.path.join(dst, "2_Dense", "pytorch_model.bin")
    save(sd, path)
    assert check_same(path, sd) == set(sd)
    return dst


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else MODELS
    made = [
        single(out, "torch_seq_cls", "seq_cls"),
        single(out, "torch_legacy_token_cls", "token_cls", legacy=True),
        single(out, "torch_f16_legacy", "seq_cls_f16", legacy=True),
        single(out, "torch_bf16", "seq_cls_bf16"),
        sharded(out, "torch_sharded", "qa"),
        views(out, "torch_views", "sentence_mean"),
        st_dense(out, "torch_st_dense", "st_weightedmean_dense"),
    ]
    for d in made:
        note = {"made_by": "scripts/make_torch_checkpoints.py", "torch": torch.__version__}
        with open(os.path.join(d, "torch_fixture.json"), "w") as f:
            json.dump(note, f, indent=2)
        print("wrote", os.path.relpath(d, out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write tiny sentence-transformers models in each on-disk format it has used.

Each directory is saved by sentence-transformers itself (the installed
release, 5.x/6.x format: "pooling_mode", "embedding_dimension", module types
such as sentence_transformers.base.modules.dense.Dense); the `legacy_` one is
then rewritten to the 2.x-4.x format (pooling_mode_* booleans,
word_embedding_dimension, sentence_transformers.models.* types), which
sentence-transformers still reads the same way. The encoder is a random tiny
BERT from make_random_model.py. Goldens come after, from sentence-transformers:

  python3 scripts/make_st_format_models.py          # into tests/data/models/
  python3 scripts/make_goldens.py tests/data/models/st_*

Needs torch and sentence-transformers.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "data", "models")

# name -> (pooling_mode, Dense modules as (out_features, bias, activation), normalize,
#          prompts, default_prompt_name, truncate_dim, include_prompt)
FORMATS = {
    # One mode new to bertrt, a Dense module with tanh (LaBSE's shape), Normalize.
    "st_weightedmean_dense": ("weightedmean", [(24, True, torch.nn.Tanh())], True, None, None, None,
                              True),
    # Three modes concatenated, Dense without a bias and Identity, then
    # another with GELU; prompts with a default; truncate_dim after Normalize.
    "st_concat_prompts": (["cls", "mean_sqrt_len_tokens", "lasttoken"],
                          [(40, False, torch.nn.Identity()), (20, True, torch.nn.GELU())], True,
                          {"query": "query: ", "passage": "passage: "}, "query", 12, True),
    # 2.x-4.x files: booleans for cls + max + mean, legacy type names, ReLU Dense.
    "st_legacy_concat": (["cls", "max", "mean"], [(16, True, torch.nn.ReLU())], False,
                         None, None, None, True),
    # Instruction-tuned embedders' shape: the prompt's tokens left out of the
    # pooling (include_prompt false), every mode concatenated so that each
    # one's handling of them is checked; an empty prompt leaves nothing out.
    "st_exclude_prompt": (["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean",
                           "lasttoken"], [], True,
                          {"query": "Represent this sentence for searching relevant passages: ",
                           "short": "q: ", "empty": ""}, "query", None, False),
}

LEGACY_TYPES = {"Transformer": "sentence_transformers.models.Transformer",
                "Pooling": "sentence_transformers.models.Pooling",
                "Dense": "sentence_transformers.models.Dense",
                "Normalize": "sentence_transformers.models.Normalize"}
LEGACY_MODES = ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"]
LEGACY_KEYS = ["pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens",
               "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
               "pooling_mode_lasttoken"]


def to_legacy(path):
    """Rewrite a saved model's module files as sentence-transformers 2.x-4.x wrote them."""
    with open(os.path.join(path, "modules.json")) as f:
        modules = json.load(f)
    for m in modules:
        m["type"] = LEGACY_TYPES[m["type"].rsplit(".", 1)[1]]
        if m["type"].endswith("Pooling"):
            cfg_path = os.path.join(path, m["path"], "config.json")
            with open(cfg_path) as f:
                cfg = json.load(f)
            modes = cfg["pooling_mode"] if isinstance(cfg["pooling_mode"], list) else [cfg["pooling_mode"]]
            legacy = {"word_embedding_dimension": cfg["embedding_dimension"]}
            legacy.update({k: mode in modes for k, mode in zip(LEGACY_KEYS, LEGACY_MODES)})
            legacy["include_prompt"] = cfg.get("include_prompt", True)
            with open(cfg_path, "w") as f:
                json.dump(legacy, f, indent=2)
    with open(os.path.join(path, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)


def make(name, seed):
    pooling, dense, normalize, prompts, default_prompt, truncate_dim, include_prompt = FORMATS[name]
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as tmp:
        bert = os.path.join(tmp, "bert")
        subprocess.run([sys.executable, os.path.join(HERE, "make_random_model.py"), "--preset", "tiny",
                        "--head", "base", "--act", "gelu", "--seed", str(seed), "--tokenizer-json",
                        "-o", bert], check=True, stdout=subprocess.DEVNULL)
        transformer = Transformer(bert, max_seq_length=48)
        modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling,
                                        include_prompt=include_prompt)]
        width = modules[-1].get_embedding_dimension()
        for out, bias, act in dense:
            modules.append(Dense(width, out, bias=bias, activation_function=act))
            width = out
        if normalize:
            modules.append(Normalize())
        model = SentenceTransformer(modules=modules, device="cpu", prompts=prompts,
                                    default_prompt_name=default_prompt, truncate_dim=truncate_dim)
        out_dir = os.path.join(MODELS, name)
        shutil.rmtree(out_dir, ignore_errors=True)
        model.save(out_dir)
    if name.startswith("st_legacy"):
        to_legacy(out_dir)
    # The model card and the empty Normalize folder tell bertrt nothing.
    for extra in ("README.md",):
        if os.path.exists(os.path.join(out_dir, extra)):
            os.remove(os.path.join(out_dir, extra))
    print(out_dir)


def main():
    for seed, name in enumerate(FORMATS, start=20):
        make(name, seed)


if __name__ == "__main__":
    main()

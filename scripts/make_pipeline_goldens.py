#!/usr/bin/env python3
"""Write pipeline_golden.json beside each token-classification and question-answering test
model: transformers' pipelines' answers (entities; answers with scores and offsets) on a set
of texts and parameters, which tests/models/test_pipeline_goldens.py holds `bertrt run --task`
and the server's HF Inference API routes to.

  python3 scripts/make_pipeline_goldens.py [MODEL_DIR ...]

Needs torch and a transformers release that still has the question-answering pipeline
(4.x; 5.x dropped it): on the GPU machine, scripts/device_pipeline_goldens.sh installs 4.57.3
from carried wheels. Runs in fp32 on the CPU.
"""
import json
import os
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "data", "models")
TOKEN_MODELS = ["token_cls", "distilbert_token_cls", "xlmr_token_cls", "modernbert_token_cls",
                "mpnet_token_cls"]
QA_MODELS = ["qa", "distilbert_qa", "xlmr_qa", "modernbert_qa", "mpnet_qa"]

TEXTS = [
    "My name is Wolfgang and I live in Berlin.",
    "Hugging Face Inc. is a company based in New York City, près de l'Hudson; 中国人 visit often!",
    "unaffable hyper-parameters (e.g. tokenization) don't matter @ 3:45pm",
]
# Longer than the models' 64 tokens: read in windows with a stride.
LONG_TEXT = ("Sarah Johnson flew from Paris to Tokyo with her colleague Ahmed on Monday. "
             "They met engineers of Sony and Toyota, then visited Kyoto's temples before "
             "returning to Europe through Frankfurt and Amsterdam in early spring.")
TOKEN_CASES = (
    [{"text": t, "parameters": {"aggregation_strategy": a}} for t in TEXTS
     for a in ("none", "simple", "first", "average", "max")]
    + [{"text": TEXTS[1], "parameters": {"aggregation_strategy": "simple", "ignore_labels": []}},
       {"text": TEXTS[0], "parameters": {"aggregation_strategy": "none", "ignore_labels": ["O", "B-PER"]}}]
    + [{"text": LONG_TEXT, "parameters": {"aggregation_strategy": a, "stride": 16}}
       for a in ("simple", "first", "average", "max")]
    + [{"text": LONG_TEXT, "parameters": {"aggregation_strategy": "first"}}])

CONTEXT = ("The Amazon rainforest covers much of the Amazon basin of South America. This basin "
           "encompasses seven million square kilometres, of which five and a half million are "
           "covered by the rainforest.")
LONG_CONTEXT = (CONTEXT + " The region includes territory belonging to nine nations and 3,344 "
                "formally acknowledged indigenous territories. The majority of the forest, 60%, "
                "is in Brazil, followed by Peru with 13%, Colombia with 10%, and with minor "
                "amounts in Bolivia, Ecuador, French Guiana, Guyana, Suriname, and Venezuela.")
QA_CASES = [
    {"question": "Where is the Amazon basin?", "context": CONTEXT, "parameters": {}},
    {"question": "How large is the basin?", "context": CONTEXT, "parameters": {"top_k": 3}},
    {"question": "Which country has most of the forest?", "context": LONG_CONTEXT,
     "parameters": {"top_k": 2}},
    {"question": "Which country has most of the forest?", "context": LONG_CONTEXT,
     "parameters": {"doc_stride": 16, "max_seq_len": 48, "max_answer_len": 4}},
    {"question": "Who owns the forest?", "context": CONTEXT,
     "parameters": {"handle_impossible_answer": True, "top_k": 2}},
    {"question": "What covers the basin?", "context": CONTEXT,
     "parameters": {"align_to_words": False, "top_k": 4}},
    {"question": "中国人 café?", "context": "Les résumés du café: 中国人 visit often, près de l'Hudson.",
     "parameters": {"top_k": 2}},
]


def plain(x):
    """numpy scalars and nested outputs as JSON values."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    return x


def load_tokenizer(path):
    """AutoTokenizer; a transformers 5 tokenizer_config ("TokenizersBackend", which 4.x does
    not know) as a PreTrainedTokenizerFast over its tokenizer.json with the config's tokens
    (no token type ids: only ModernBERT's configs are written so)."""
    try:
        return transformers.AutoTokenizer.from_pretrained(path)
    except ValueError:
        with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        keys = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                "mask_token", "model_max_length")
        return transformers.PreTrainedTokenizerFast(
            tokenizer_file=os.path.join(path, "tokenizer.json"),
            model_input_names=config.get("model_input_names", ["input_ids", "attention_mask"]),
            **{k: config[k] for k in keys if k in config})


def main(names):
    torch.manual_seed(0)
    for name in names:
        path = os.path.join(MODELS, name)
        token = name in TOKEN_MODELS
        auto = (transformers.AutoModelForTokenClassification if token
                else transformers.AutoModelForQuestionAnswering)
        model = auto.from_pretrained(path, dtype=torch.float32).eval()
        tok = load_tokenizer(path)
        pipe = transformers.pipeline("token-classification" if token else "question-answering",
                                     model=model, tokenizer=tok, device="cpu")
        cases = []
        for case in (TOKEN_CASES if token else QA_CASES):
            if token:
                out = pipe(case["text"], **case["parameters"])
            else:
                out = pipe(question=case["question"], context=case["context"], **case["parameters"])
            cases.append({**case, "output": plain(out)})
        golden = {"task": "token-classification" if token else "question-answering",
                  "made_by": f"transformers {transformers.__version__} pipelines, torch "
                             f"{torch.__version__}, fp32 CPU (scripts/make_pipeline_goldens.py)",
                  "cases": cases}
        with open(os.path.join(path, "pipeline_golden.json"), "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{name}: {len(cases)} cases")


if __name__ == "__main__":
    main(sys.argv[1:] or TOKEN_MODELS + QA_MODELS)

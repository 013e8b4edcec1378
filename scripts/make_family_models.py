#!/usr/bin/env python3
"""Write the tiny random-weight test models of the families beyond BERT
(RoBERTa, XLM-RoBERTa, CamemBERT, DistilBERT, MPNet, ModernBERT) and the SPLADE models
(masked-LM heads of BERT, XLM-R and DistilBERT, and a sentence-transformers
SparseEncoder), then their golden.json.

  python3 scripts/make_family_models.py [OUT_DIR]     (default tests/data/models)

Needs torch, transformers, sentence-transformers and tokenizers (the GPU
machine has them; scripts/make_goldens.py documents the golden format). The
models are transformers' own classes, initialized from a seed and saved with
save_pretrained, so every weight name and config field is what a user's
fine-tuned checkpoint has. Sizes are the BERT test models' `tiny` preset:
hidden 32, 2 layers, 4 heads, intermediate 37, 64 positions (RoBERTa-family
tables have 2 more: their positions start after padding_idx).

Weights: transformers' initialization with initializer_range 0.15 (so
attention is not uniform and the outputs depend on the input), then every
1-D parameter (biases, LayerNorm) moved by N(0, 0.05) so that a missing bias
or a swapped LayerNorm changes the outputs.
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import make_goldens  # noqa: E402

TOKENIZERS = os.path.join(ROOT, "tests", "data", "tokenizer")
BERT_VOCAB = os.path.join(ROOT, "tests", "data", "models", "seq_cls", "vocab.txt")
TINY = dict(hidden=32, layers=2, heads=4, intermediate=37, positions=64)
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def roberta_like_config(config_class, vocab_size, act, **extra):
    return config_class(vocab_size=vocab_size, hidden_size=TINY["hidden"],
                        num_hidden_layers=TINY["layers"], num_attention_heads=TINY["heads"],
                        intermediate_size=TINY["intermediate"], hidden_act=act,
                        max_position_embeddings=TINY["positions"] + 2, type_vocab_size=1,
                        pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        initializer_range=0.15, layer_norm_eps=1e-5, **extra)


def distilbert_config(act, **extra):
    return transformers.DistilBertConfig(
        vocab_size=512, dim=TINY["hidden"], n_layers=TINY["layers"], n_heads=TINY["heads"],
        hidden_dim=TINY["intermediate"], activation=act,
        max_position_embeddings=TINY["positions"], initializer_range=0.15, **extra)


def bert_config(**extra):
    return transformers.BertConfig(
        vocab_size=512, hidden_size=TINY["hidden"], num_hidden_layers=TINY["layers"],
        num_attention_heads=TINY["heads"], intermediate_size=TINY["intermediate"],
        max_position_embeddings=TINY["positions"], initializer_range=0.15, **extra)


def modernbert_config(biases, local_theta=10000.0, **extra):
    """ModernBERT's tiny preset: 4 layers, so that layers 1 and 2 are local
    (global_attn_every_n_layers 3) with a window of 8 (+-4) that the longer
    test texts exceed; biases on or off together (attention, MLP, LayerNorm,
    prediction head); the local layers' rotary theta 10,000 as ModernBERT's
    (the global layers' 160,000)."""
    kw = dict(vocab_size=3000, hidden_size=TINY["hidden"], num_hidden_layers=4,
              num_attention_heads=TINY["heads"], intermediate_size=TINY["intermediate"],
              max_position_embeddings=TINY["positions"], global_attn_every_n_layers=3,
              local_attention=8, initializer_range=0.15, pad_token_id=3, bos_token_id=None,
              eos_token_id=None, cls_token_id=1, sep_token_id=2, attention_bias=biases,
              mlp_bias=biases, norm_bias=biases, classifier_bias=biases)
    kw.update(extra)
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": local_theta}}
    try:
        return transformers.ModernBertConfig(rope_parameters=rope, **kw)
    except TypeError:  # transformers 4.x: the older keys
        return transformers.ModernBertConfig(global_rope_theta=160000.0,
                                             local_rope_theta=local_theta, **kw)


def sparse_encoder_dir(path, pooling_strategy, activation_function):
    """Makes a saved BertForMaskedLM directory a sentence-transformers
    SparseEncoder (MLMTransformer + SpladePooling), saved by
    sentence-transformers itself."""
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling
    mlm = MLMTransformer(path, max_seq_length=48)
    pool = SpladePooling(pooling_strategy=pooling_strategy,
                         activation_function=activation_function)
    SparseEncoder(modules=[mlm, pool], device="cpu").save(path)


def labels(names):
    return dict(num_labels=len(names), id2label=dict(enumerate(names)),
                label2id={n: i for i, n in enumerate(names)})


def wordpiece_fast(cls, words, **kwargs):
    """A WordPiece fast tokenizer over `words`. transformers 5 builds it from
    a vocabulary dict and silently ignores vocab_file (a 5-entry vocabulary
    of the special tokens: every word [UNK]); older versions take the file."""
    vocab = {w: i for i, w in enumerate(words)}
    try:
        tok = cls(vocab=vocab, do_lower_case=True, model_max_length=TINY["positions"], **kwargs)
    except TypeError:
        path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(words) + "\n")
        tok = cls(vocab_file=path, do_lower_case=True, model_max_length=TINY["positions"],
                  **kwargs)
    # Fails here, not in the goldens, if the vocabulary did not take.
    assert len(tok) == len(words) and tok.unk_token_id not in tok("hello world").input_ids, \
        (cls.__name__, len(tok))
    return tok


def tokenizer_for(family):
    """The family's fast tokenizer over the committed test vocabulary."""
    with open(BERT_VOCAB, encoding="utf-8") as f:
        bert_words = [w for w in f.read().split("\n") if w]
    if family == "mpnet":
        # MPNet's vocabulary layout: <s> <pad> </s> <unk> first (so <pad> is
        # id 1, the model's padding_idx), then WordPiece's, then <mask>.
        tok = wordpiece_fast(transformers.MPNetTokenizerFast,
                             ["<s>", "<pad>", "</s>", "<unk>"] + bert_words + ["<mask>"])
        assert tok.pad_token_id == 1, tok.pad_token_id
        return tok
    if family == "modernbert":
        # ModernBERT's shape (tests/data/tokenizer/modernbert): byte-level BPE
        # with [CLS] $A [SEP] templates, [UNK] [CLS] [SEP] [PAD] [MASK] first.
        return transformers.PreTrainedTokenizerFast(
            tokenizer_file=os.path.join(TOKENIZERS, "modernbert", "tokenizer.json"),
            unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
            mask_token="[MASK]", model_max_length=TINY["positions"])
    if family == "bert":
        return wordpiece_fast(transformers.BertTokenizerFast, bert_words)
    if family == "distilbert":
        return wordpiece_fast(transformers.DistilBertTokenizerFast, bert_words)
    cls = {"roberta": transformers.RobertaTokenizerFast,
           "xlmr": transformers.XLMRobertaTokenizerFast,
           "camembert": transformers.CamembertTokenizerFast}[family]
    source = "xlmr" if family == "camembert" else family
    return cls(tokenizer_file=os.path.join(TOKENIZERS, source, "tokenizer.json"),
               model_max_length=TINY["positions"])


def build(model_class, config, seed):
    torch.manual_seed(seed)
    model = model_class(config).eval()
    gen = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1:
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
            if "relative_attention_bias" in name:
                p.mul_(5.0)  # MPNet's bias, large enough that a wrong bucket shows
    return model


def save(out, name, model, tokenizer):
    path = os.path.join(out, name)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def sentence_transformers_dir(path, pooling, normalize, max_seq_length):
    """Makes a saved transformers directory a sentence-transformers one
    (Transformer at the root, Pooling, optionally Normalize), as
    SentenceTransformer.save writes it."""
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(path, "2_Normalize"), exist_ok=True)
    os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
    modes = ["cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
             "weightedmean_tokens", "lasttoken"]
    pool = {"word_embedding_dimension": TINY["hidden"]}
    pool.update({f"pooling_mode_{m}": m == pooling for m in modes})
    pool["include_prompt"] = True
    for name, content in [("modules.json", modules),
                          ("sentence_bert_config.json",
                           {"max_seq_length": max_seq_length, "do_lower_case": False}),
                          (os.path.join("1_Pooling", "config.json"), pool)]:
        with open(os.path.join(path, name), "w") as f:
            json.dump(content, f, indent=2)
            f.write("\n")


def main(argv):
    # --only NAME,NAME: just those models (and their goldens).
    only = None
    if argv[:1] == ["--only"]:
        only, argv = set(argv[1].split(",")), argv[2:]
    out = argv[0] if argv else os.path.join(ROOT, "tests", "data", "models")
    t = transformers
    # The test tokenizers: RoBERTa 3,000 ids; XLM-R 3,001 (its <mask> comes after the
    # pieces, as in the real one).
    rob_vocab, xlmr_vocab = 3000, 3001
    made = []

    def add(name, model_class, config, family, seed, st=None, sparse=None):
        if only is not None and name not in only:
            return
        tokenizer = tokenizer_for(family)
        # The tokenizer's limit is the model's (modernbert_long's 8,192).
        tokenizer.model_max_length = config.max_position_embeddings - (
            2 if family in ("roberta", "xlmr", "camembert", "mpnet") else 0)
        # Every id the tokenizer can give has an embedding row (CamemBERT's
        # tokenizer adds its <s>NOTUSED-style tokens past the pieces).
        config.vocab_size = max(config.vocab_size, len(tokenizer))

        path = save(out, name, build(model_class, config, seed), tokenizer)
        if st:
            sentence_transformers_dir(path, **st)
        if sparse:
            sparse_encoder_dir(path, **sparse)
        made.append(path)

    add("roberta_seq_cls", t.RobertaForSequenceClassification,
        roberta_like_config(t.RobertaConfig, rob_vocab, "gelu",
                            **labels(["negative", "neutral", "positive"])), "roberta", 21)
    add("roberta_base", t.RobertaModel,
        roberta_like_config(t.RobertaConfig, rob_vocab, "gelu_new"), "roberta", 22)
    add("xlmr_token_cls", t.XLMRobertaForTokenClassification,
        roberta_like_config(t.XLMRobertaConfig, xlmr_vocab, "gelu", **labels(NER_LABELS)),
        "xlmr", 23)
    add("xlmr_qa", t.XLMRobertaForQuestionAnswering,
        roberta_like_config(t.XLMRobertaConfig, xlmr_vocab, "gelu"), "xlmr", 24)
    # A cross-encoder reranker (bge-reranker's shape): one logit.
    add("xlmr_reranker", t.XLMRobertaForSequenceClassification,
        roberta_like_config(t.XLMRobertaConfig, xlmr_vocab, "gelu", **labels(["LABEL_0"])),
        "xlmr", 25)
    # multilingual-e5's shape: XLMRobertaModel, mean pooling, Normalize.
    add("xlmr_sentence_mean", t.XLMRobertaModel,
        roberta_like_config(t.XLMRobertaConfig, xlmr_vocab, "gelu"),
        "xlmr", 26, st=dict(pooling="mean_tokens", normalize=True, max_seq_length=48))
    add("camembert_seq_cls", t.CamembertForSequenceClassification,
        roberta_like_config(t.CamembertConfig, xlmr_vocab, "gelu", **labels(["a", "b"])),
        "camembert", 27)
    add("distilbert_seq_cls", t.DistilBertForSequenceClassification,
        distilbert_config("gelu", **labels(["CLASS_0", "CLASS_1", "CLASS_2"])),
        "distilbert", 28)
    add("distilbert_token_cls", t.DistilBertForTokenClassification,
        distilbert_config("relu", **labels(NER_LABELS)), "distilbert", 29)
    add("distilbert_qa", t.DistilBertForQuestionAnswering, distilbert_config("gelu"),
        "distilbert", 30)
    # msmarco-distilbert's shape: DistilBertModel, CLS pooling.
    add("distilbert_sentence_cls", t.DistilBertModel, distilbert_config("gelu"), "distilbert",
        31, st=dict(pooling="cls_token", normalize=False, max_seq_length=48))

    add("mpnet_seq_cls", t.MPNetForSequenceClassification,
        roberta_like_config(t.MPNetConfig, 512, "gelu", **labels(["no", "yes"])), "mpnet", 32)
    add("mpnet_token_cls", t.MPNetForTokenClassification,
        roberta_like_config(t.MPNetConfig, 512, "gelu", **labels(NER_LABELS)), "mpnet", 33)
    add("mpnet_qa", t.MPNetForQuestionAnswering,
        roberta_like_config(t.MPNetConfig, 512, "gelu"), "mpnet", 46)
    # all-mpnet-base-v2's shape: MPNetModel, mean pooling, Normalize; the
    # whole 64 positions, so distances reach the log-spaced buckets.
    add("mpnet_sentence_mean", t.MPNetModel, roberta_like_config(t.MPNetConfig, 512, "gelu"),
        "mpnet", 34, st=dict(pooling="mean_tokens", normalize=True, max_seq_length=64))

    # ModernBERT: a mean-pooled classifier without biases, a cls-pooled
    # 1-label reranker with every bias (gte-reranker-modernbert's shape), an
    # embedder (modernbert-embed's: mean + Normalize) and SPLADE.
    add("modernbert_seq_cls", t.ModernBertForSequenceClassification,
        modernbert_config(False, classifier_pooling="mean", **labels(["neg", "neu", "pos"])),
        "modernbert", 39)
    add("modernbert_reranker", t.ModernBertForSequenceClassification,
        modernbert_config(True, classifier_pooling="cls", hidden_activation="gelu_pytorch_tanh",
                          **labels(["LABEL_0"])), "modernbert", 40)
    add("modernbert_sentence_mean", t.ModernBertModel, modernbert_config(False), "modernbert", 41,
        st=dict(pooling="mean_tokens", normalize=True, max_seq_length=64))
    add("modernbert_splade", t.ModernBertForMaskedLM, modernbert_config(False), "modernbert", 42)
    add("modernbert_token_cls", t.ModernBertForTokenClassification,
        modernbert_config(True, **labels(NER_LABELS)), "modernbert", 43)
    add("modernbert_qa", t.ModernBertForQuestionAnswering, modernbert_config(False),
        "modernbert", 44)
    # One rotary theta for every layer: the engines share one table.
    add("modernbert_one_theta", t.ModernBertForSequenceClassification,
        modernbert_config(False, local_theta=160000.0, **labels(["neg", "pos"])), "modernbert", 47)
    # Every one of ModernBERT's 8,192 positions (make_goldens' full-length
    # input) with its real window of 128 (+-64).
    add("modernbert_long", t.ModernBertForSequenceClassification,
        modernbert_config(False, **labels(["neg", "pos"]), max_position_embeddings=8192,
                          local_attention=128), "modernbert", 45)

    # SPLADE: masked-LM heads (their decoders tied to the word embeddings, as
    # save_pretrained writes them), served by /embed_sparse.
    add("splade_bert", t.BertForMaskedLM, bert_config(), "bert", 35)
    add("xlmr_splade", t.XLMRobertaForMaskedLM,
        roberta_like_config(t.XLMRobertaConfig, xlmr_vocab, "gelu"), "xlmr", 36)
    add("distilbert_splade", t.DistilBertForMaskedLM, distilbert_config("gelu"), "distilbert", 37)
    # A SparseEncoder with the options that differ from SPLADE's defaults:
    # sum pooling and OpenSearch's log1p_relu (log1p twice).
    add("splade_st_sum", t.BertForMaskedLM, bert_config(hidden_act="gelu_new"), "bert", 38,
        sparse=dict(pooling_strategy="sum", activation_function="log1p_relu"))

    torch.manual_seed(0)
    for path in made:
        make_goldens.make(path)


if __name__ == "__main__":
    main(sys.argv[1:])

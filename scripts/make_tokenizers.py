"""Builds the small XLM-R-, RoBERTa- and ModernBERT-shape tokenizer.json files
under tests/data/tokenizer/ that the parity tests compare bertrt with.

No model hub is reachable from the machines bertrt is developed on, so the
real files cannot be fetched; these are equivalents built with the PyPI
`tokenizers` package's own trainers and components, in the structure the real
files have:

- xlmr/: SentencePieceUnigramTokenizer trained on the corpus (vocab ~3000),
  normalizer Sequence[Precompiled, Replace(" {2,}" -> " ")] as XLM-R's, whose
  precompiled_charsmap is taken from a SentencePiece model trained here with
  the `sentencepiece` package (its default nmt_nfkc rule), Metaspace, the
  <s> $A </s> [</s> $B </s>] template and the <mask> token with lstrip.
- roberta/: ByteLevelBPETokenizer (vocab ~3000) with RobertaProcessing and
  RoBERTa's special tokens.
- modernbert/: the same BPE behind ModernBERT's structure: pre_tokenizer
  Sequence[Split(a GPT-4-style regex, isolated), ByteLevel(use_regex=false)],
  TemplateProcessing [CLS] $A [SEP] [$B [SEP]], ByteLevel decoder.

Run: python3 scripts/make_tokenizers.py   (needs tokenizers and sentencepiece)
The goldens next to the files come from `tokenizers` 0.23.3, the version
scripts/install_deps.sh pins.
"""
import json
import pathlib
import tempfile

import sentencepiece as spm
from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors, decoders, Regex
from tokenizers.implementations import SentencePieceUnigramTokenizer, ByteLevelBPETokenizer

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "tokenizer"
VOCAB = 3000


def training_text():
    lines = [json.loads(l) for l in (DATA / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if l]
    texts = []
    for item in lines:
        texts.append(item["text"])
        if item.get("text_pair"):
            texts.append(item["text_pair"])
    # The corpus alone is too small for a few thousand pieces: the README and
    # the docs of the repository add English prose.
    for path in [ROOT / "README.md", *sorted((ROOT / "bench").glob("*.md"))]:
        texts.extend(l for l in path.read_text(encoding="utf-8").splitlines() if l.strip())
    return texts


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def proto_field(buf, wanted):
    """Bytes of the first length-delimited field `wanted` of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(buf, i)
            if field == wanted:
                return buf[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")
    raise KeyError(wanted)


def precompiled_charsmap(texts):
    """The nmt_nfkc charsmap of a SentencePiece model trained on `texts`
    (ModelProto.normalizer_spec = 3, NormalizerSpec.precompiled_charsmap = 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "train.txt"
        src.write_text("\n".join(texts), encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(src), model_prefix=f"{tmp}/m", vocab_size=500,
                                       model_type="unigram", hard_vocab_limit=False,
                                       minloglevel=2)
        model = (pathlib.Path(tmp) / "m.model").read_bytes()
    return proto_field(proto_field(model, 3), 2)


def save(tok, name):
    out = DATA / name / "tokenizer.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    print(f"{out}: vocab {tok.get_vocab_size()}")


def make_xlmr(texts):
    t = SentencePieceUnigramTokenizer()
    t.train_from_iterator(texts, vocab_size=VOCAB, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                          unk_token="<unk>", show_progress=False)
    tok = Tokenizer.from_str(t._tokenizer.to_str())
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(precompiled_charsmap(texts)),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)])
    ids = {t: tok.token_to_id(t) for t in ("<s>", "</s>")}
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", ids["<s>"]), ("</s>", ids["</s>"])])
    save(tok, "xlmr")


def train_bpe(texts, specials):
    t = ByteLevelBPETokenizer(add_prefix_space=False)
    t.train_from_iterator(texts, vocab_size=VOCAB, min_frequency=2, special_tokens=specials,
                          show_progress=False)
    return Tokenizer.from_str(t._tokenizer.to_str())


def make_roberta(texts):
    tok = train_bpe(texts, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=False)
    save(tok, "roberta")


GPT4_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def make_modernbert(texts):
    tok = train_bpe(texts, ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT4_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    ids = {t: tok.token_to_id(t) for t in ("[CLS]", "[SEP]")}
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    save(tok, "modernbert")


if __name__ == "__main__":
    texts = training_text()
    make_xlmr(texts)
    make_roberta(texts)
    make_modernbert(texts)

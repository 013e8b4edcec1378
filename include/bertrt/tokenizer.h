// Tokenizers identical to HF `tokenizers` in ids, type ids, offsets and
// special tokens masks: BERT WordPiece (BertNormalizer, BertPreTokenizer,
// WordPiece, TemplateProcessing) on a fused path, and any other tokenizer.json
// (Unigram, BPE and their normalizers, pre-tokenizers and post-processors)
// through the component pipeline. The loader picks one from tokenizer.json.
// A long text that is cut or refused at a token limit is tokenized only as
// far as the limit needs (EncodeLimits), with the same result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bertrt/status.h"

namespace bertrt {

enum class Truncation { kLongestFirst, kOnlyFirst, kOnlySecond };

// Parses "longest_first" | "only_first" | "only_second".
StatusOr<Truncation> ParseTruncation(std::string_view name);
const char* TruncationName(Truncation t);

// The one rule for an input text, in the server and `bertrt run` alike: an
// empty text is refused (it would embed [CLS] [SEP] alone, a vector that means
// nothing) with an error that says so.
Status CheckInputText(std::string_view text);

struct Encoding {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;
  // [start, end) in Unicode code points of the text the token came from
  // (text or text_pair); (0, 0) for special tokens, as HF gives them.
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  // 1 for tokens added by the post-processor ([CLS], [SEP]).
  std::vector<uint8_t> special_tokens_mask;
  // 0 for text, 1 for text_pair, -1 for special tokens.
  std::vector<int8_t> sequence_ids;
  // HF's word ids: the index, within its text, of the word each token came
  // from (a pre-tokenizer split, or an added token); -1 for special tokens.
  // Where the start of a text longer than 16 KiB was cut (truncation from
  // the left), counted from the first word kept.
  std::vector<int32_t> word_ids;
};

// `full`, an untruncated encoding of a text (and, with `is_pair`, a text
// pair), as the tokenizer gives it at `max_length` with `strategy`, without
// tokenizing again: each text keeps as many tokens as Encode's truncation
// leaves it, from its start (HF's truncation direction "right"), or with
// `from_start` its last ones ("left"). The special tokens stay: the template
// does not depend on the texts' lengths. Errors as Encode's.
StatusOr<Encoding> TruncateEncoding(const Encoding& full, bool is_pair, size_t max_length,
                                    Truncation strategy, bool from_start = false);

// `full` cut into windows of at most `max_length` tokens, as HF's
// return_overflowing_tokens with `stride` gives them (the special tokens in
// each): one text's tokens (the text's, or a pair's by `strategy`
// only_first/only_second) go in windows that each start `stride` tokens
// before the previous one ended; the other text stays whole in each. One
// window when it all fits. longest_first over a pair, a text that cannot
// give up the tokens, or a stride not below the window's length are
// InvalidArgument; more than `max_windows` windows (0: no limit)
// ResourceExhausted, before any is made.
StatusOr<std::vector<Encoding>> OverflowWindows(const Encoding& full, bool is_pair,
                                                size_t max_length, size_t stride,
                                                Truncation strategy, size_t max_windows = 0);

// What Encode may do with a text, as a server bounds a request.
struct EncodeLimits {
  // The most tokens the encoding may have, the special tokens included (the
  // model's limit); 0: no limit.
  size_t max_length = 0;
  // Over max_length: cut as TruncateEncoding cuts the whole text's encoding
  // (by `truncation`; each text keeps its last tokens with `truncate_left`),
  // or, without `truncate`, refused with OutOfRange.
  bool truncate = true;
  bool truncate_left = false;
  Truncation truncation = Truncation::kLongestFirst;
  // OutOfRange once the part of a text that tokenizing it needs normalizes
  // to more than this many chars (or a piece of it that cannot be normalized
  // apart is longer): the backstop for texts no token limit bounds; 0: none.
  size_t max_normalized_chars = 0;
  // With truncate_left, how many of the first text's cut tokens to count
  // (EncodeReport::first_text_cut); a server needs to know whether a prompt
  // at the text's start was cut.
  size_t count_first_text_cut_up_to = 0;
};

// What Encode with EncodeLimits found beyond the encoding.
struct EncodeReport {
  // Refused for more than max_length tokens: how many there are (with the
  // special tokens), exactly or, when `exact` is false, at least.
  bool too_long = false;
  size_t tokens = 0;
  bool exact = true;
  // Tokens of the first text truncate_left cut, counted up to
  // count_first_text_cut_up_to.
  size_t first_text_cut = 0;
  // Cut to max_length: some of the texts' tokens are not in the encoding.
  bool truncated = false;
};

struct TokenizerSettings {
  // BertNormalizer
  bool clean_text = true;
  bool handle_chinese_chars = true;
  // nullopt: follow `lowercase` (HF's rule: strip accents when lowercasing).
  std::optional<bool> strip_accents;
  bool lowercase = true;
  // WordPiece
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  int max_input_chars_per_word = 100;
  // Post-processor
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  // Added as a special token by FromVocab when it is in the vocabulary.
  std::string mask_token = "[MASK]";
};

class Tokenizer {
 public:
  // Loads tokenizer.json from `dir`, or vocab.txt + tokenizer_config.json where
  // tokenizer.json is absent.
  static StatusOr<std::shared_ptr<Tokenizer>> FromDirectory(const std::string& dir);
  // From the contents of a tokenizer.json file (untrusted bytes).
  static StatusOr<std::shared_ptr<Tokenizer>> FromTokenizerJson(std::string_view json);
  // From the lines of a vocab.txt and explicit settings.
  static StatusOr<std::shared_ptr<Tokenizer>> FromVocab(std::vector<std::string> vocab,
                                                        TokenizerSettings settings);

  virtual ~Tokenizer() = default;

  // max_length 0 means no truncation. The special tokens count towards
  // max_length, as in HF. Invalid UTF-8 gives InvalidArgument naming the byte
  // offset and which text it is in.
  StatusOr<Encoding> Encode(std::string_view text,
                            std::optional<std::string_view> text_pair = std::nullopt,
                            size_t max_length = 0,
                            Truncation truncation = Truncation::kLongestFirst) const {
    EncodeLimits limits;
    limits.max_length = max_length;
    limits.truncation = truncation;
    return Encode(text, text_pair, limits);
  }
  // The encoding of the texts cut (or refused) by `limits` as the whole
  // texts' encoding would be, tokenizing only as much of a long text as the
  // tokens kept need. Refused for max_length: OutOfRange, and `report` (when
  // given) says how many tokens.
  virtual StatusOr<Encoding> Encode(std::string_view text,
                                    std::optional<std::string_view> text_pair,
                                    const EncodeLimits& limits,
                                    EncodeReport* report = nullptr) const = 0;

  virtual const TokenizerSettings& settings() const = 0;
  virtual size_t vocab_size() const = 0;
  // -1 when the token is not in the vocabulary.
  virtual int32_t TokenToId(std::string_view token) const = 0;
  virtual std::string IdToToken(int32_t id) const = 0;
  // The model's unknown token's id; -1: it has none.
  virtual int32_t unk_id() const = 0;
  // What the model marks a word's later pieces with ("##" for WordPiece);
  // empty where nothing does (Unigram, byte-level BPE): HF's
  // continuing_subword_prefix, which tells transformers' pipelines whether
  // tokens show where words end.
  virtual std::string_view continuing_subword_prefix() const = 0;
  // Token ids back to text, as HF's Tokenizer.decode: each id's token (ids
  // with none are skipped), the added tokens marked special left out when
  // `skip_special_tokens`, joined by the file's decoder (WordPiece: "##"
  // pieces glued to the previous token, others after a space, and with
  // cleanup " ." -> "." and the like, per token; no decoder: joined by spaces).
  virtual std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;
  // Token strings to text by the decoder alone (transformers'
  // convert_tokens_to_string): what Decode does once it has each id's token.
  virtual std::string DecodeTokens(std::vector<std::string> tokens) const = 0;
  // The vocabulary in id order (for plan files and inspect).
  virtual std::vector<std::string> Vocabulary() const = 0;
  // What the tokenizer is made of, for inspect: "WordPiece (BertNormalizer,
  // BertPreTokenizer)", or the model and the component types of its
  // tokenizer.json ("Unigram; normalizer Sequence[Precompiled, Replace]; ...").
  virtual std::string Description() const = 0;
  int32_t pad_id() const { return TokenToId(settings().pad_token); }
};

}  // namespace bertrt

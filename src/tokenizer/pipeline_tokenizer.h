// The component pipeline tokenizer: for every tokenizer.json that is not a
// plain BERT WordPiece one (those keep the fused BertTokenizer). Wired as
// HF's TokenizerImpl::encode: added tokens not normalized are split off the
// raw text, the rest is normalized, normalized added tokens are split off,
// the pre-tokenizer makes words, the model makes tokens; after truncation,
// the post-processor trims byte-level offsets and applies its template.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bertrt/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/components.h"
#include "tokenizer/model.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/vocab_map.h"

namespace bertrt::tokenizer {

// One step of tokenizer.json's decoder (a Sequence is several), applied to
// the list of token strings as HF's decode_chain is.
struct DecoderStep {
  enum Kind { kByteLevel, kMetaspace, kWordPiece, kBpe, kByteFallback, kFuse, kStrip, kReplace };
  Kind kind;
  std::string text;                      // WordPiece prefix, BPE suffix, Replace content
  bool flag = true;                      // WordPiece cleanup; Metaspace: strip the first token's
  char32_t c = 0;                        // Metaspace replacement, Strip content
  size_t start = 0, stop = 0;            // Strip counts
  std::shared_ptr<const Regex> pattern;  // Replace
};

struct PipelineParts {
  TokenizerSettings settings;                   // only the special tokens' names are read
  std::unique_ptr<Normalizer> normalizer;       // null: none
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null: none
  std::unique_ptr<Model> model;
  std::vector<AddedToken> added_tokens;
  PostProcessor post_processor;
  // ByteLevel offset trimming (the ByteLevel or RobertaProcessing
  // post-processor's trim_offsets) and its add_prefix_space.
  bool trim_offsets = false;
  bool trim_add_prefix_space = false;
  std::string description;  // for inspect
  // No decoder: tokens joined by spaces; else the steps, then joined.
  bool has_decoder = false;
  std::vector<DecoderStep> decoder;
};

class PipelineTokenizer final : public Tokenizer {
 public:
  static StatusOr<std::shared_ptr<Tokenizer>> Create(PipelineParts parts);

  StatusOr<Encoding> Encode(std::string_view text, std::optional<std::string_view> text_pair,
                            size_t max_length, Truncation truncation) const override;
  const TokenizerSettings& settings() const override { return parts_.settings; }
  size_t vocab_size() const override { return id_to_token_.size(); }
  int32_t TokenToId(std::string_view token) const override;
  std::string IdToToken(int32_t id) const override;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::vector<std::string> Vocabulary() const override { return id_to_token_; }
  std::string Description() const override { return parts_.description; }

 private:
  struct Scratch;
  explicit PipelineTokenizer(PipelineParts parts) : parts_(std::move(parts)) {}
  Status EncodeSequence(std::string_view text, bool is_pair, Scratch& s, TokenList& out) const;
  Status EncodeNormalized(NormalizedString&& norm, Scratch& s, TokenList& out) const;
  void PushTrimmed(int32_t id, uint32_t start, uint32_t end, uint32_t lead, uint32_t trail,
                   TokenList& out) const;

  PipelineParts parts_;
  VocabMap added_vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> special_;
  // Leading and trailing spaces of each token, for offset trimming.
  std::vector<std::pair<uint32_t, uint32_t>> token_spaces_;
  AddedTokenMatcher raw_added_;
  AddedTokenMatcher normalized_added_;
};

}  // namespace bertrt::tokenizer

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
#include "tokenizer/bounded_encoder.h"
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

class PipelineTokenizer final : public Tokenizer, public PieceEncoder {
 public:
  static StatusOr<std::shared_ptr<Tokenizer>> Create(PipelineParts parts);

  using Tokenizer::Encode;
  StatusOr<Encoding> Encode(std::string_view text, std::optional<std::string_view> text_pair,
                            const EncodeLimits& limits, EncodeReport* report) const override {
    if (ReadInPieces(text.size() + (text_pair ? text_pair->size() : 0)))
      return EncodeInPieces(*this, text, text_pair, limits, report);
    return EncodeWhole(text, text_pair, limits, report);
  }
  const TokenizerSettings& settings() const override { return parts_.settings; }
  size_t vocab_size() const override { return id_to_token_.size(); }
  int32_t TokenToId(std::string_view token) const override;
  std::string IdToToken(int32_t id) const override;
  int32_t unk_id() const override { return parts_.model->unk_id(); }
  std::string_view continuing_subword_prefix() const override {
    return parts_.model->continuing_subword_prefix();
  }
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::string DecodeTokens(std::vector<std::string> tokens) const override;
  std::vector<std::string> Vocabulary() const override { return id_to_token_; }
  std::string Description() const override { return parts_.description; }

  // PieceEncoder
  const AddedTokenMatcher& raw_added_tokens() const override { return raw_added_; }
  const PostProcessor& post_processor() const override { return parts_.post_processor; }
  StatusOr<Encoding> EncodeWhole(std::string_view text, std::optional<std::string_view> text_pair,
                                 const EncodeLimits& limits, EncodeReport* report) const override;
  bool NormalizerCutsBefore(char32_t before, char32_t at, char32_t next) const override {
    return !parts_.normalizer || parts_.normalizer->CutsBefore(before, at, next);
  }
  std::optional<size_t> NormalizerStartLag(const char32_t* chars, size_t n,
                                           bool whole) const override {
    return parts_.normalizer ? parts_.normalizer->StartLag(chars, n, whole) : 0;
  }
  void Normalize(const char32_t* chars, uint32_t n, uint32_t first,
                 NormalizedString& out) const override;
  bool EncoderCutsBefore(const char32_t* s, size_t at) const override {
    return parts_.pre_tokenizer && parts_.pre_tokenizer->CutsBefore(s, at) &&
           normalized_added_.CutsBefore(s, at);
  }
  Status EncodeNormalized(NormalizedString&& s, Piece& out) const override;
  void PushAddedToken(int32_t id, std::string_view text, uint32_t begin, uint32_t end,
                      Piece& out) const override;

 private:
  struct Scratch;
  // The calling thread's buffers (kept small by Scratch::ReleaseLarge).
  static Scratch& ThreadScratch();
  explicit PipelineTokenizer(PipelineParts parts) : parts_(std::move(parts)) {}
  // One text's tokens (special tokens aside) into `out`.
  Status EncodeSequence(std::string_view text, bool is_pair, size_t max_normalized, Scratch& s,
                        TokenList& out) const;
  // The tokens of normalized text: normalized added tokens, then words.
  // `offsets_if_first`: see PushTrimmed.
  Status EncodeNormalizedText(NormalizedString&& norm, Scratch& s, TokenList& out,
                              std::optional<TokenOffsets>* offsets_if_first) const;
  Status EncodeWords(NormalizedString&& norm, Scratch& s, TokenList& out,
                     std::optional<TokenOffsets>* offsets_if_first) const;
  // Appends a token with ByteLevel's offset trimming, which keeps the space
  // add_prefix_space put before a text's first token. `out` holds the text's
  // tokens so far, or, with `offsets_if_first`, a piece of it (whether a
  // token comes before is not known): its first token's offsets as the
  // text's first then go to *offsets_if_first where they differ.
  void PushTrimmed(int32_t id, uint32_t start, uint32_t end, uint32_t lead, uint32_t trail,
                   TokenList& out, std::optional<TokenOffsets>* offsets_if_first) const;

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

// The Tokenizer implementation: added-token splitting, BertNormalizer,
// BertPreTokenizer, WordPiece and the template post-processor, wired as HF's
// TokenizerImpl::encode does.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bertrt/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bounded_encoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/vocab_map.h"
#include "tokenizer/wordpiece.h"

namespace bertrt::tokenizer {

// Everything a tokenizer is made of, as read from tokenizer.json or vocab.txt.
struct TokenizerParts {
  TokenizerSettings settings;
  bool has_normalizer = true;                          // false: tokenizer.json's normalizer is null
  std::vector<std::pair<std::string, int32_t>> vocab;  // the WordPiece model's
  std::vector<AddedToken> added_tokens;
  PostProcessor post_processor;
  // tokenizer.json's "decoder": WordPiece (the default, also for vocab.txt)
  // with its prefix and cleanup, or none (tokens joined by spaces).
  bool wordpiece_decoder = true;
  std::string decoder_prefix = "##";
  bool decoder_cleanup = true;
};

// HF's WordPiece decoder, in place: each token after the first loses
// `prefix` (a word's continuation) or gains a leading space (a new word), then
// with `cleanup` " ." becomes "." and the like. Concatenated, the tokens are
// the text.
void WordPieceDecode(std::vector<std::string>& tokens, const std::string& prefix, bool cleanup);

class BertTokenizer final : public Tokenizer, public PieceEncoder {
 public:
  static StatusOr<std::shared_ptr<Tokenizer>> Create(TokenizerParts parts);

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
  int32_t unk_id() const override { return wordpiece_->unk_id(); }
  std::string_view continuing_subword_prefix() const override { return wordpiece_->prefix(); }
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::string DecodeTokens(std::vector<std::string> tokens) const override;
  std::vector<std::string> Vocabulary() const override { return id_to_token_; }
  std::string Description() const override {
    return parts_.has_normalizer ? "WordPiece (BertNormalizer, BertPreTokenizer)"
                                 : "WordPiece (no normalizer, BertPreTokenizer)";
  }

  // PieceEncoder
  const AddedTokenMatcher& raw_added_tokens() const override { return raw_added_; }
  const PostProcessor& post_processor() const override { return parts_.post_processor; }
  StatusOr<Encoding> EncodeWhole(std::string_view text, std::optional<std::string_view> text_pair,
                                 const EncodeLimits& limits, EncodeReport* report) const override;
  bool NormalizerCutsBefore(char32_t, char32_t at, char32_t) const override {
    return tokenizer::CutsBefore(normalizer_, at);
  }
  std::optional<size_t> NormalizerStartLag(const char32_t*, size_t, bool) const override {
    return 0;  // every char aligns as the char it comes from
  }
  void Normalize(const char32_t* chars, uint32_t n, uint32_t first,
                 NormalizedString& out) const override;
  bool EncoderCutsBefore(const char32_t* s, size_t at) const override;
  Status EncodeNormalized(NormalizedString&& s, Piece& out) const override;
  void PushAddedToken(int32_t id, std::string_view, uint32_t begin, uint32_t end,
                      Piece& out) const override {
    out.tokens.PushWord(id, begin, end);
  }

 private:
  struct Scratch;
  // The calling thread's buffers (kept small by Scratch::ReleaseLarge).
  static Scratch& ThreadScratch();
  explicit BertTokenizer(TokenizerParts parts);
  // One text's tokens (special tokens aside) into `out`.
  Status EncodeSequence(std::string_view text, bool is_pair, size_t max_normalized, Scratch& s,
                        TokenList& out) const;
  // The tokens of normalized text: normalized added tokens, then words.
  void EncodeNormalizedText(const NormalizedText& norm, Scratch& s, TokenList& out) const;
  void EncodeWords(const NormalizedText& norm, uint32_t begin, uint32_t end, Scratch& s,
                   TokenList& out) const;

  TokenizerParts parts_;
  NormalizerOptions normalizer_;
  VocabMap model_vocab_;
  VocabMap added_vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> special_;           // by id: an added token marked special
  AddedTokenMatcher raw_added_;         // normalized=false: matched before normalizing
  AddedTokenMatcher normalized_added_;  // normalized=true: matched after
  std::unique_ptr<WordPiece> wordpiece_;
};

}  // namespace bertrt::tokenizer

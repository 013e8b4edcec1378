// SentencePiece Unigram, as HF's Unigram model encodes (its optimized path,
// SentencePiece's own): Viterbi over the word's UTF-8 bytes, each vocabulary
// piece scoring its log probability; a char that no single-char piece covers
// becomes unk at the lowest score minus 10; adjacent unks fuse into one; an
// unk piece turns into <0xNN> byte tokens when byte_fallback has them all.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/model.h"
#include "tokenizer/vocab_map.h"

namespace bertrt::tokenizer {

class Unigram final : public Model {
 public:
  // `unk_id` -1: none (an unknown char is then an error, as in HF).
  static StatusOr<std::unique_ptr<Unigram>> Create(
      std::vector<std::pair<std::string, double>> pieces, int32_t unk_id, bool byte_fallback);
  Status Tokenize(const NormalizedString& word, std::vector<WordToken>& out) const override;
  int32_t TokenToId(std::string_view token) const override { return ids_.Find(token); }
  const std::vector<std::pair<std::string, int32_t>>& Vocab() const override { return vocab_; }
  bool IdIsText(int32_t id) const override { return id == unk_id_; }
  int32_t unk_id() const override { return unk_id_; }

 private:
  Unigram() = default;
  std::vector<std::pair<std::string, int32_t>> vocab_;
  std::vector<double> scores_;
  VocabMap ids_;
  ByteTrie trie_;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  double unk_score_ = 0;
  int32_t byte_ids_[256];  // <0xNN> ids, -1 where absent
};

}  // namespace bertrt::tokenizer

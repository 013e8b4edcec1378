// BPE as HF's model applies it: a word starts as one symbol per char (with
// continuing_subword_prefix on all but the first, end_of_word_suffix on the
// last), unknown chars become <0xNN> byte tokens (byte_fallback) or unk
// (fused when fuse_unk), then the lowest-ranked mergeable pair is merged,
// leftmost first, until none is left. Dropout is refused when loading: it
// makes encoding random.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/model.h"
#include "tokenizer/vocab_map.h"

namespace bertrt::tokenizer {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::optional<std::string> continuing_subword_prefix;
  std::optional<std::string> end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class Bpe final : public Model {
 public:
  static StatusOr<std::unique_ptr<Bpe>> Create(
      std::vector<std::pair<std::string, int32_t>> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);
  Status Tokenize(const NormalizedString& word, std::vector<WordToken>& out) const override;
  int32_t TokenToId(std::string_view token) const override { return ids_.Find(token); }
  const std::vector<std::pair<std::string, int32_t>>& Vocab() const override { return vocab_; }
  int32_t unk_id() const override { return unk_id_; }
  std::string_view continuing_subword_prefix() const override {
    return options_.continuing_subword_prefix ? std::string_view(*options_.continuing_subword_prefix)
                                              : std::string_view();
  }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  Bpe() = default;
  Status TokenizeUncached(const NormalizedString& word, std::vector<WordToken>& out) const;
  int32_t CharId(char32_t c, bool first, bool last, std::string& buf) const;
  void MergeAll(std::vector<WordToken>& symbols) const;

  std::vector<std::pair<std::string, int32_t>> vocab_;
  VocabMap ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256];
  // Ids of single chars below U+0200 with no prefix or suffix: the whole
  // byte-level alphabet, looked up once instead of per char.
  std::vector<int32_t> plain_char_ids_;
  uint64_t id_ = 0;  // keys this model's per-thread word cache
};

}  // namespace bertrt::tokenizer

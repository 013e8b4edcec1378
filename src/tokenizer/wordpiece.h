// WordPiece: greedy longest-match-first over a word's UTF-8 bytes, pieces
// after the first carrying the continuing-subword prefix. A word longer than
// max_input_chars_per_word chars, or with any piece not in the vocabulary,
// becomes a single unk token spanning the whole word (as in HF).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/normalizer.h"
#include "tokenizer/vocab_map.h"

namespace bertrt::tokenizer {

// Token ids with [start, end) offsets in original code points, and which
// tokens begin a word (a pre-tokenizer split or an added token: HF's word ids).
struct TokenList {
  std::vector<int32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  std::vector<uint8_t> word_starts;
  // Words of the text wholly before ids[0] (cut off its start).
  uint32_t words_before = 0;
  // The next token pushed begins a word.
  bool next_starts_word = false;

  void clear() {
    ids.clear();
    offsets.clear();
    word_starts.clear();
    words_before = 0;
    next_starts_word = false;
  }
  void BeginWord() { next_starts_word = true; }
  void Push(int32_t id, uint32_t start, uint32_t end) {
    ids.push_back(id);
    offsets.emplace_back(start, end);
    word_starts.push_back(next_starts_word);
    next_starts_word = false;
  }
  // An added token: a word of its own.
  void PushWord(int32_t id, uint32_t start, uint32_t end) {
    BeginWord();
    Push(id, start, end);
  }
  // Drops the first n tokens, counting the words they began.
  void DropFront(size_t n) {
    for (size_t i = 0; i < n; ++i) words_before += word_starts[i];
    ids.erase(ids.begin(), ids.begin() + n);
    offsets.erase(offsets.begin(), offsets.begin() + n);
    word_starts.erase(word_starts.begin(), word_starts.begin() + n);
  }
  void Resize(size_t n) {
    ids.resize(n);
    offsets.resize(n);
    word_starts.resize(n);
  }
};

// Per-call buffers, reused across calls so words cost no allocations.
struct WordScratch {
  std::vector<char> bytes;
  std::vector<uint32_t> byte_char;  // char index (in the word) of each byte
  std::vector<uint64_t> hashes;
};

class WordPiece {
 public:
  WordPiece(const VocabMap* vocab, int32_t unk_id, std::string prefix, size_t max_chars)
      : vocab_(vocab), unk_id_(unk_id), prefix_(std::move(prefix)), max_chars_(max_chars) {}

  // Appends the tokens of the word text.chars[begin, end).
  void Tokenize(const NormalizedText& text, uint32_t begin, uint32_t end, WordScratch& scratch,
                TokenList& out) const;
  int32_t unk_id() const { return unk_id_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const VocabMap* vocab_;
  int32_t unk_id_;
  std::string prefix_;
  size_t max_chars_;
};

}  // namespace bertrt::tokenizer

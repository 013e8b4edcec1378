// The model step of the component pipeline: a pre-tokenized word (a split's
// normalized chars) in, tokens out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/status.h"
#include "tokenizer/normalized_string.h"

namespace bertrt::tokenizer {

// A token of a word: its id and the word's chars [begin, end) it covers.
struct WordToken {
  int32_t id;
  uint32_t begin;
  uint32_t end;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the tokens of `word` (non-empty) to `out`.
  virtual Status Tokenize(const NormalizedString& word, std::vector<WordToken>& out) const = 0;
  virtual int32_t TokenToId(std::string_view token) const = 0;
  // The vocabulary as (token, id) pairs.
  virtual const std::vector<std::pair<std::string, int32_t>>& Vocab() const = 0;
  // Whether a token with this id stands for the text it covers rather than
  // its vocabulary entry (Unigram's unk: HF's token value is the text), which
  // byte-level offset trimming reads.
  virtual bool IdIsText(int32_t /*id*/) const { return false; }
  // The unknown token's id; -1: none.
  virtual int32_t unk_id() const { return -1; }
  // What marks a word's later pieces ("##"); empty: nothing does.
  virtual std::string_view continuing_subword_prefix() const { return {}; }
};

// Byte strings -> ids with common-prefix search, for Viterbi over a text's
// bytes. Built once from the vocabulary; nodes keep their edges sorted by
// byte in one array, the root's in a 256-entry table since every search
// passes there.
class ByteTrie {
 public:
  void Build(const std::vector<std::pair<std::string, int32_t>>& keys);
  // Calls on_match(length, id) for each key that is a prefix of s[0, n),
  // shortest first.
  template <typename F>
  void PrefixSearch(const unsigned char* s, size_t n, F&& on_match) const {
    if (n == 0) return;
    int32_t node = root_[s[0]];
    size_t i = 1;
    while (node >= 0) {
      const Node& nd = nodes_[node];
      if (nd.value >= 0) on_match(i, nd.value);
      if (i == n) return;
      const unsigned char b = s[i++];
      int32_t next = -1;
      for (uint32_t k = nd.first; k < nd.first + nd.count; ++k) {
        if (edges_[k].byte == b) {
          next = edges_[k].child;
          break;
        }
        if (edges_[k].byte > b) break;
      }
      node = next;
    }
  }

 private:
  struct Node {
    uint32_t first = 0;
    uint32_t count = 0;
    int32_t value = -1;
  };
  struct Edge {
    unsigned char byte;
    int32_t child;
  };
  int32_t root_[256];
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
};

}  // namespace bertrt::tokenizer

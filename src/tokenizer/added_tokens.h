// Added tokens ([CLS], [MASK], user tokens) found in the input text, as HF's
// AddedVocabulary does: leftmost-longest matches, then the single_word,
// lstrip and rstrip rules. Tokens with normalized=false are matched on the
// original text before normalization; those with normalized=true on the
// normalized text, against their normalized content.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bertrt::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A piece of the text: an added token (id >= 0) or plain text (id < 0), as
// [begin, end) indices into the searched code points.
struct Segment {
  uint32_t begin;
  uint32_t end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  // `pattern` is the token's content as code points (normalized for
  // normalized tokens); empty patterns never match.
  void Add(std::vector<char32_t> pattern, const AddedToken& token);
  bool empty() const { return patterns_.empty(); }

  // Splits text[begin, end) into segments, appended to `out`. Empty text
  // segments are left out.
  void Split(const char32_t* text, uint32_t begin, uint32_t end, std::vector<Segment>& out) const;

 private:
  struct Pattern {
    std::vector<char32_t> chars;
    int32_t id;
    bool lstrip, rstrip, single_word;
  };
  // Longest pattern matching at text[i] (nullptr when none).
  const Pattern* MatchAt(const char32_t* text, uint32_t i, uint32_t end) const;

  std::vector<Pattern> patterns_;  // by first char, then longest first
};

}  // namespace bertrt::tokenizer

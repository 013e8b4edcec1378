// Added tokens ([CLS], [MASK], user tokens) found in the input text, as HF's
// AddedVocabulary does: leftmost-longest matches, then the single_word,
// lstrip and rstrip rules. Tokens with normalized=false are matched on the
// original text before normalization; those with normalized=true on the
// normalized text, against their normalized content.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
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

// A segment of a UTF-8 text: bytes [byte_begin, byte_end), chars [begin, end).
struct Utf8Segment {
  size_t byte_begin;
  size_t byte_end;
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

  // Whether splitting text cut before s[at] part by part gives the segments
  // of the whole (the text segment around the cut cut there): no match may
  // hold s[at - 1] or s[at], and with lstrip/rstrip tokens whitespace at
  // s[at - 1] could be taken across the cut. Needs s[at - 1] and s[at].
  bool CutsBefore(const char32_t* s, size_t at) const;

  // Split's segments of a whole UTF-8 text (valid, `chars` code points),
  // one at a time from its start: a long text is read without decoding it
  // whole, and only as far as the caller goes.
  class Utf8Scan {
   public:
    Utf8Scan(const AddedTokenMatcher& m, std::string_view text, size_t chars);
    // The next segment; false after the last.
    bool Next(Utf8Segment& out);

   private:
    struct Pos {
      size_t byte;
      uint32_t chr;
    };
    void StepForward(Pos& p) const;
    void StepBack(Pos& p) const;
    const AddedTokenMatcher& m_;
    std::string_view text_;
    Pos end_;
    Pos done_{0, 0};  // end of the last segment given
    Pos i_{0, 0};     // where the next match is looked for
    bool have_token_ = false;
    Utf8Segment token_{};  // found with the text segment before it
  };

 private:
  struct Pattern {
    std::vector<char32_t> chars;
    int32_t id;
    bool lstrip, rstrip, single_word;
    uint32_t utf8;  // its UTF-8 in utf8_
  };
  // Longest pattern matching at text[i] (nullptr when none).
  const Pattern* MatchAt(const char32_t* text, uint32_t i, uint32_t end) const;
  // The same at byte i of a UTF-8 text of n bytes.
  const Pattern* MatchAtUtf8(const char* text, size_t i, size_t n) const;

  std::vector<Pattern> patterns_;  // by first char, then longest first
  // The patterns' UTF-8, apart from patterns_ that MatchAt searches per char.
  std::vector<std::string> utf8_;
  std::array<bool, 256> first_bytes_{};  // lead bytes of the patterns
  std::vector<char32_t> pattern_chars_;  // every char of a pattern, sorted
  bool strips_ = false;                  // some token has lstrip or rstrip
};

}  // namespace bertrt::tokenizer

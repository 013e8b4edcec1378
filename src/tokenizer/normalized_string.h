// HF's NormalizedString for the component pipeline (Unigram and BPE models):
// the normalized code points, each with the [begin, end) range of original
// code points it stands for. HF keeps one alignment per normalized *byte*, but
// it gives all bytes of a char the same alignment and every original range
// covers whole chars, so one alignment per char carries the same information;
// working in code points also gives the Encoding's char offsets directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace bertrt::tokenizer {

struct Span {
  uint32_t begin;
  uint32_t end;
};

// One char of a transformation, as HF's transform takes them: change 0
// replaces the next old char, 1 inserts a char (aligned as the old char before
// it), -n replaces the next old char and removes the n after it.
struct CharChange {
  char32_t c;
  int32_t change;
};

struct NormalizedString {
  std::vector<char32_t> chars;
  std::vector<Span> align;
  // The original offset where this (slice of the) string starts: HF's
  // original_shift. A char inserted before every old char aligns to it.
  uint32_t origin = 0;

  size_t size() const { return chars.size(); }
  bool empty() const { return chars.empty(); }

  // The string for original chars [begin, end) of `text`, unnormalized.
  void Reset(const char32_t* text, uint32_t begin, uint32_t end) {
    Assign(text + begin, end - begin, begin);
  }
  // The same for chars[0, n), the first of which is char `first` of a text.
  void Assign(const char32_t* chars, uint32_t n, uint32_t first);
  // Replaces the chars by `dest`, skipping `initial_offset` old chars
  // first, with HF's alignment rules (positional, as HF's are).
  void Transform(const std::vector<CharChange>& dest, size_t initial_offset);
  // Chars [begin, end) as a string of its own (HF's slice of a normalized range).
  NormalizedString Slice(size_t begin, size_t end) const;
  // Original offsets of normalized chars [begin, end) (non-empty).
  std::pair<uint32_t, uint32_t> Original(size_t begin, size_t end) const {
    return {align[begin].begin, align[end - 1].end};
  }

  void Prepend(const std::vector<char32_t>& s);
  // Removes leading/trailing Rust-whitespace chars.
  void Strip(bool left, bool right);
  // Replaces each [begin, end) of `matches` (sorted, disjoint) by `content`,
  // whose chars all align as the last replaced char (HF's replace).
  void ReplaceMatches(const std::vector<std::pair<size_t, size_t>>& matches,
                      const std::vector<char32_t>& content);
};

}  // namespace bertrt::tokenizer

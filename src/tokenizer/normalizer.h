// HF's BertNormalizer on code points: clean_text, CJK padding, strip_accents
// (NFD, then drop nonspacing marks) and lowercase, in that order. Every output
// character remembers the index of the input character it came from, which is
// what HF's per-byte alignments reduce to for these transformations (an
// inserted or expanded char shares its source char's alignment; a removed char
// leaves none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bertrt::tokenizer {

struct NormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;  // already resolved (None follows lowercase)
  bool lowercase = true;
};

struct NormalizedText {
  std::vector<char32_t> chars;
  std::vector<uint32_t> source;  // index of the original code point
  size_t size() const { return chars.size(); }
};

// Normalizes in[begin, end) (indices are kept absolute) and appends to `out`.
void Normalize(const NormalizerOptions& options, const char32_t* in, uint32_t begin,
               uint32_t end, NormalizedText& out);

// Whether text cut before char `c` normalizes, part by part, to the whole's
// normalization: every char is normalized alone, but for the canonical
// reordering of combining marks (with strip_accents), which a starter ends.
bool CutsBefore(const NormalizerOptions& options, char32_t c);

}  // namespace bertrt::tokenizer

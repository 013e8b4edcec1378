#include "tokenizer/normalized_string.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace bertrt::tokenizer {

void NormalizedString::Assign(const char32_t* text, uint32_t n, uint32_t first) {
  chars.assign(text, text + n);
  align.resize(n);
  for (uint32_t i = 0; i < n; ++i) align[i] = {first + i, first + i + 1};
  origin = first;
}

void NormalizedString::Transform(const std::vector<CharChange>& dest, size_t initial_offset) {
  std::vector<char32_t> new_chars;
  std::vector<Span> new_align;
  new_chars.reserve(dest.size());
  new_align.reserve(dest.size());
  // `offset` walks the old chars the way HF's byte offset does: a replacing
  // char takes the alignment of the next old char, an inserted one that of
  // the old char before (or the string's origin when there is none).
  size_t offset = initial_offset;
  const Span none{origin, origin};
  for (const CharChange& d : dest) {
    Span a;
    if (d.change > 0) {
      a = offset == 0 || align.empty() ? none : align[std::min(offset, align.size()) - 1];
    } else {
      // HF would panic past the end; a dest from a normalizer of ours never
      // gets there, so this only guards against a logic error.
      a = offset < align.size() ? align[offset] : (align.empty() ? none : align.back());
      offset += 1 + static_cast<size_t>(-d.change);
    }
    new_chars.push_back(d.c);
    new_align.push_back(a);
  }
  chars = std::move(new_chars);
  align = std::move(new_align);
}

NormalizedString NormalizedString::Slice(size_t begin, size_t end) const {
  NormalizedString s;
  s.chars.assign(chars.begin() + begin, chars.begin() + end);
  s.align.assign(align.begin() + begin, align.begin() + end);
  s.origin = begin < end ? align[begin].begin : origin;
  return s;
}

void NormalizedString::Prepend(const std::vector<char32_t>& s) {
  if (chars.empty() || s.empty()) return;
  // HF replaces the first char by s + that char: every new char shares the
  // first char's alignment.
  const Span first = align.front();
  chars.insert(chars.begin(), s.begin(), s.end());
  align.insert(align.begin(), s.size(), first);
}

void NormalizedString::Strip(bool left, bool right) {
  size_t lead = 0;
  size_t trail = 0;
  const size_t n = chars.size();
  auto space = [](char32_t c) { return (CharFlags(c) & kWhitespace) != 0; };
  if (left) {
    while (lead < n && space(chars[lead])) ++lead;
  }
  if (right) {
    while (trail < n - lead && space(chars[n - 1 - trail])) ++trail;
  }
  if (lead == 0 && trail == 0) return;
  chars.erase(chars.end() - trail, chars.end());
  align.erase(align.end() - trail, align.end());
  chars.erase(chars.begin(), chars.begin() + lead);
  align.erase(align.begin(), align.begin() + lead);
}

void NormalizedString::ReplaceMatches(const std::vector<std::pair<size_t, size_t>>& matches,
                                      const std::vector<char32_t>& content) {
  if (matches.empty()) return;
  std::vector<char32_t> out_chars;
  std::vector<Span> out_align;
  out_chars.reserve(chars.size());
  out_align.reserve(chars.size());
  size_t last = 0;
  for (const auto& [b, e] : matches) {
    out_chars.insert(out_chars.end(), chars.begin() + last, chars.begin() + b);
    out_align.insert(out_align.end(), align.begin() + last, align.begin() + b);
    const Span a = e == 0 ? Span{origin, origin} : align[e - 1];
    out_chars.insert(out_chars.end(), content.begin(), content.end());
    out_align.insert(out_align.end(), content.size(), a);
    last = e;
  }
  out_chars.insert(out_chars.end(), chars.begin() + last, chars.end());
  out_align.insert(out_align.end(), align.begin() + last, align.end());
  chars = std::move(out_chars);
  align = std::move(out_align);
}

}  // namespace bertrt::tokenizer

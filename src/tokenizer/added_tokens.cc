#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace bertrt::tokenizer {
namespace {

bool IsWhitespace(char32_t c) { return CharFlags(c) & kWhitespace; }

}  // namespace

void AddedTokenMatcher::Add(std::vector<char32_t> pattern, const AddedToken& token) {
  if (pattern.empty()) return;
  // Inserted after its equals, which keeps the order a stable sort gave, at
  // O(n) per token rather than a sort per token (files with thousands of
  // added tokens load in quadratic time otherwise).
  Pattern p{std::move(pattern), token.id, token.lstrip, token.rstrip, token.single_word};
  auto at = std::upper_bound(patterns_.begin(), patterns_.end(), p,
                             [](const Pattern& a, const Pattern& b) {
                               if (a.chars[0] != b.chars[0]) return a.chars[0] < b.chars[0];
                               return a.chars.size() > b.chars.size();
                             });
  patterns_.insert(at, std::move(p));
}

const AddedTokenMatcher::Pattern* AddedTokenMatcher::MatchAt(const char32_t* text, uint32_t i,
                                                             uint32_t end) const {
  const char32_t c = text[i];
  auto it = std::lower_bound(patterns_.begin(), patterns_.end(), c,
                             [](const Pattern& p, char32_t v) { return p.chars[0] < v; });
  for (; it != patterns_.end() && it->chars[0] == c; ++it) {
    const size_t n = it->chars.size();
    if (n <= end - i && std::equal(it->chars.begin(), it->chars.end(), text + i)) return &*it;
  }
  return nullptr;
}

void AddedTokenMatcher::Split(const char32_t* text, uint32_t begin, uint32_t end,
                              std::vector<Segment>& out) const {
  uint32_t done = begin;  // end of the last emitted segment
  uint32_t i = begin;
  while (i < end) {
    const Pattern* p = MatchAt(text, i, end);
    if (p == nullptr) {
      ++i;
      continue;
    }
    uint32_t start = i;
    uint32_t stop = i + static_cast<uint32_t>(p->chars.size());
    // A rejected match still consumes its characters, as the automaton's
    // iterator does in HF.
    i = stop;
    if (p->single_word) {
      const bool word_before = start > begin && IsWordChar(text[start - 1]);
      const bool word_after = stop < end && IsWordChar(text[stop]);
      if (word_before || word_after) continue;
    }
    if (p->lstrip) {
      while (start > done && IsWhitespace(text[start - 1])) --start;
    }
    if (p->rstrip) {
      while (stop < end && IsWhitespace(text[stop])) ++stop;
    }
    if (done < start) out.push_back({done, start, -1});
    out.push_back({start, stop, p->id});
    done = stop;
    i = std::max(i, stop);
  }
  if (done < end) out.push_back({done, end, -1});
}

}  // namespace bertrt::tokenizer

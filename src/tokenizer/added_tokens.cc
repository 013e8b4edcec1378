#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {
namespace {

bool IsWhitespace(char32_t c) { return CharFlags(c) & kWhitespace; }

}  // namespace

void AddedTokenMatcher::Add(std::vector<char32_t> pattern, const AddedToken& token) {
  if (pattern.empty()) return;
  // Inserted after its equals, which keeps the order a stable sort gave, at
  // O(n) per token rather than a sort per token (files with thousands of
  // added tokens load in quadratic time otherwise).
  std::string utf8;
  for (char32_t c : pattern) {
    char buf[4];
    utf8.append(buf, AppendUtf8(c, buf));
    const auto at = std::lower_bound(pattern_chars_.begin(), pattern_chars_.end(), c);
    if (at == pattern_chars_.end() || *at != c) pattern_chars_.insert(at, c);
  }
  first_bytes_[static_cast<unsigned char>(utf8[0])] = true;
  strips_ |= token.lstrip || token.rstrip;
  utf8_.push_back(std::move(utf8));
  Pattern p{std::move(pattern), token.id,          token.lstrip,
            token.rstrip,       token.single_word, static_cast<uint32_t>(utf8_.size() - 1)};
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

const AddedTokenMatcher::Pattern* AddedTokenMatcher::MatchAtUtf8(const char* text, size_t i,
                                                                 size_t n) const {
  if (!first_bytes_[static_cast<unsigned char>(text[i])]) return nullptr;
  const char32_t c = Utf8CharAt(text, i);
  auto it = std::lower_bound(patterns_.begin(), patterns_.end(), c,
                             [](const Pattern& p, char32_t v) { return p.chars[0] < v; });
  // Equal bytes from a char boundary of valid UTF-8 are equal chars.
  for (; it != patterns_.end() && it->chars[0] == c; ++it) {
    const std::string& utf8 = utf8_[it->utf8];
    if (utf8.size() <= n - i && std::memcmp(text + i, utf8.data(), utf8.size()) == 0) return &*it;
  }
  return nullptr;
}

bool AddedTokenMatcher::CutsBefore(const char32_t* s, size_t at) const {
  if (patterns_.empty()) return true;
  auto in_pattern = [&](char32_t c) {
    return std::binary_search(pattern_chars_.begin(), pattern_chars_.end(), c);
  };
  return !in_pattern(s[at - 1]) && !in_pattern(s[at]) && !(strips_ && IsWhitespace(s[at - 1]));
}

AddedTokenMatcher::Utf8Scan::Utf8Scan(const AddedTokenMatcher& m, std::string_view text,
                                      size_t chars)
    : m_(m), text_(text), end_{text.size(), static_cast<uint32_t>(chars)} {
  // Without patterns the text is one segment: nothing to scan.
  if (m_.empty()) i_ = end_;
}

void AddedTokenMatcher::Utf8Scan::StepForward(Pos& p) const {
  p.byte += Utf8Length(static_cast<unsigned char>(text_[p.byte]));
  ++p.chr;
}

void AddedTokenMatcher::Utf8Scan::StepBack(Pos& p) const {
  p.byte = Utf8PreviousChar(text_.data(), p.byte);
  --p.chr;
}

// Split's loop over UTF-8, stopped at each segment it finds.
bool AddedTokenMatcher::Utf8Scan::Next(Utf8Segment& out) {
  if (have_token_) {
    have_token_ = false;
    out = token_;
    return true;
  }
  const char* t = text_.data();
  while (i_.byte < end_.byte) {
    const Pattern* p = m_.MatchAtUtf8(t, i_.byte, end_.byte);
    if (p == nullptr) {
      StepForward(i_);
      continue;
    }
    Pos start = i_;
    Pos stop{i_.byte + m_.utf8_[p->utf8].size(), i_.chr + static_cast<uint32_t>(p->chars.size())};
    i_ = stop;
    if (p->single_word) {
      const bool word_before =
          start.byte > 0 && IsWordChar(Utf8CharAt(t, Utf8PreviousChar(t, start.byte)));
      const bool word_after = stop.byte < end_.byte && IsWordChar(Utf8CharAt(t, stop.byte));
      if (word_before || word_after) continue;
    }
    if (p->lstrip) {
      while (start.byte > done_.byte &&
             IsWhitespace(Utf8CharAt(t, Utf8PreviousChar(t, start.byte))))
        StepBack(start);
    }
    if (p->rstrip) {
      while (stop.byte < end_.byte && IsWhitespace(Utf8CharAt(t, stop.byte))) StepForward(stop);
    }
    token_ = {start.byte, stop.byte, start.chr, stop.chr, p->id};
    const Pos text_begin = done_;
    done_ = stop;
    if (stop.byte > i_.byte) i_ = stop;
    if (text_begin.byte < start.byte) {
      out = {text_begin.byte, start.byte, text_begin.chr, start.chr, -1};
      have_token_ = true;
    } else {
      out = token_;
    }
    return true;
  }
  if (done_.byte >= end_.byte) return false;
  out = {done_.byte, end_.byte, done_.chr, end_.chr, -1};
  done_ = end_;
  return true;
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

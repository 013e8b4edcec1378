// Pre-tokenizers of the component pipeline: each splits normalized strings
// into words the way HF's does (find the delimiters, apply the split
// behaviour, drop empty pieces).
#include <utf8proc.h>

#include <algorithm>

#include "tokenizer/components.h"
#include "tokenizer/scratch.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {
namespace {

struct Piece {
  size_t begin, end;
  bool match;
};

// HF's NormalizedString::split: folds the pieces by behaviour, then slices.
void SplitPieces(const NormalizedString& s, const std::vector<Piece>& pieces,
                 SplitBehavior behavior, std::vector<NormalizedString>& out) {
  thread_local std::vector<Piece> kept;  // match here means "remove"
  ScratchGuard guard(kept);
  kept.clear();
  bool previous = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Piece& p : pieces) kept.push_back({p.begin, p.end, false});
      break;
    case SplitBehavior::kRemoved:
      kept = pieces;
      break;
    case SplitBehavior::kContiguous:
      for (const Piece& p : pieces) {
        if (p.match == previous && !kept.empty()) {
          kept.back().end = p.end;
        } else {
          kept.push_back({p.begin, p.end, false});
        }
        previous = p.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Piece& p : pieces) {
        if (p.match && !previous && !kept.empty()) {
          kept.back().end = p.end;
        } else {
          kept.push_back({p.begin, p.end, false});
        }
        previous = p.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
        if (it->match && !previous && !kept.empty()) {
          kept.back().begin = it->begin;
        } else {
          kept.push_back({it->begin, it->end, false});
        }
        previous = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Piece& p : kept) {
    if (!p.match && p.end > p.begin) out.push_back(s.Slice(p.begin, p.end));
  }
}

// Pieces where each char satisfying `is_delim` is a match of its own.
template <typename F>
void CharPieces(const NormalizedString& s, F&& is_delim, std::vector<Piece>& pieces) {
  pieces.clear();
  size_t last = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!is_delim(s.chars[i])) continue;
    if (last < i) pieces.push_back({last, i, false});
    pieces.push_back({i, i + 1, true});
    last = i + 1;
  }
  if (last < s.size()) pieces.push_back({last, s.size(), false});
}

void RegexPieces(const NormalizedString& s, const Regex& re, bool invert,
                 std::vector<Piece>& pieces) {
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  ScratchGuard guard(matches);
  re.FindAll(s.chars.data(), s.size(), matches);
  pieces.clear();
  size_t last = 0;
  for (const auto& [b, e] : matches) {
    if (last != b) pieces.push_back({last, b, invert});
    pieces.push_back({b, e, !invert});
    last = e;
  }
  if (last != s.size()) pieces.push_back({last, s.size(), invert});
}

// GPT-2's split, the one ByteLevel applies when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// cl100k's split (OLMo, ModernBERT), as a Split pre-tokenizer gives it.
constexpr const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Not whitespace to Oniguruma's \s (Unicode White_Space), and not one of the
// chars other engines count as such either.
bool SurelyNotSpace(char32_t c) {
  if (c < 0x80) return c > 0x20 && c != 0x7F;
  return c != 0x85 && c != 0xA0 && c != 0x1680 && c != 0x180E && !(c >= 0x2000 && c <= 0x200B) &&
         c != 0x2028 && c != 0x2029 && c != 0x202F && c != 0x205F && c != 0x3000 && c != 0xFEFF;
}

// Where the GPT-2 and cl100k patterns always split: before a space between
// two non-spaces. No alternative matches a non-space then a space (a space
// only ever starts a match, and the all-whitespace ones hold no non-space),
// so the match holding s[at - 1] ends at the cut; every char is matched by
// some alternative, so the next match starts there; none looks behind, and
// the one lookahead, (?!\S), sees a space at the cut and the end of the
// text alike. Each part is thus split as the whole is; and the part after
// the cut starts with a space, which ByteLevel's add_prefix_space leaves.
bool SpaceBetweenWords(const char32_t* s, size_t at) {
  return s[at] == U' ' && SurelyNotSpace(s[at - 1]) && SurelyNotSpace(s[at + 1]);
}

// Applies `split_one` (string -> appended pieces) to every split.
template <typename F>
void SplitEach(std::vector<NormalizedString>& splits, F&& split_one) {
  std::vector<NormalizedString> out;
  out.reserve(splits.size());
  for (NormalizedString& s : splits) split_one(s, out);
  splits.swap(out);
}

bool IsWhitespace(char32_t c) { return (CharFlags(c) & kWhitespace) != 0; }

struct Range {
  char32_t first, last;
};
// Where HF's Unicode tables disagree with utf8proc's (generated by
// tests/tokenizer/gen_component_exceptions.py).
#include "tokenizer/component_exceptions.inc"

// Classes of the Whitespace pre-tokenizer's \w+|[^\w\s]+ (Rust regex's \w:
// Alphabetic, marks, decimal digits, connector punctuation, joiners).
enum CharClass : uint8_t { kSpaceClass, kWordClass, kOtherClass };
CharClass WhitespaceClass(char32_t c) {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(0x110000);
    for (char32_t x = 0; x < 0x110000; ++x) {
      const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(x));
      const bool word = (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_ME) ||
                        cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
                        cat == UTF8PROC_CATEGORY_PC || x == 0x200C || x == 0x200D;
      t[x] = IsWhitespace(x) ? kSpaceClass : word ? kWordClass : kOtherClass;
    }
    for (const Range& r : kNotWordChar) {
      for (char32_t x = r.first; x <= r.last; ++x) t[x] = kOtherClass;
    }
    for (const Range& r : kExtraWordChar) {
      for (char32_t x = r.first; x <= r.last; ++x) t[x] = kWordClass;
    }
    return t;
  }();
  return static_cast<CharClass>(table[c]);
}

// Whitespace: runs of word chars and runs of other non-space chars.
class WhitespaceRuns final : public PreTokenizer {
 public:
  void PreTokenize(std::vector<NormalizedString>& splits) const override {
    SplitEach(splits, [&](const NormalizedString& s, std::vector<NormalizedString>& out) {
      const size_t n = s.size();
      for (size_t i = 0; i < n;) {
        const CharClass k = WhitespaceClass(s.chars[i]);
        size_t j = i + 1;
        while (j < n && WhitespaceClass(s.chars[j]) == k) ++j;
        if (k != kSpaceClass) out.push_back(s.Slice(i, j));
        i = j;
      }
    });
  }
  // A run ends where the class changes.
  bool CutsBefore(const char32_t* s, size_t at) const override {
    return WhitespaceClass(s[at - 1]) != WhitespaceClass(s[at]);
  }
};
bool IsPunct(char32_t c) { return (CharFlags(c) & kPunct) != 0; }
bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

template <typename F>
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(F is_delim, SplitBehavior behavior) : is_delim_(is_delim), behavior_(behavior) {}
  void PreTokenize(std::vector<NormalizedString>& splits) const override {
    thread_local std::vector<Piece> pieces;
    ScratchGuard guard(pieces);
    SplitEach(splits, [&](const NormalizedString& s, std::vector<NormalizedString>& out) {
      CharPieces(s, is_delim_, pieces);
      SplitPieces(s, pieces, behavior_, out);
    });
  }
  // Where the pieces SplitPieces makes of CharPieces' meet.
  bool CutsBefore(const char32_t* s, size_t at) const override {
    const bool before = is_delim_(s[at - 1]);
    const bool after = is_delim_(s[at]);
    switch (behavior_) {
      case SplitBehavior::kRemoved:
      case SplitBehavior::kIsolated:
        return before || after;
      case SplitBehavior::kMergedWithNext:
        return after;
      case SplitBehavior::kMergedWithPrevious:
        return before;
      case SplitBehavior::kContiguous:
        return before != after;
    }
    return false;
  }

 private:
  F is_delim_;
  SplitBehavior behavior_;
};

template <typename F>
std::unique_ptr<PreTokenizer> MakeCharSplit(F f, SplitBehavior behavior) {
  return std::make_unique<CharSplit<F>>(f, behavior);
}

class RegexSplit final : public PreTokenizer {
 public:
  RegexSplit(std::shared_ptr<const Regex> re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<NormalizedString>& splits) const override {
    thread_local std::vector<Piece> pieces;
    ScratchGuard guard(pieces);
    SplitEach(splits, [&](const NormalizedString& s, std::vector<NormalizedString>& out) {
      RegexPieces(s, *re_, invert_, pieces);
      SplitPieces(s, pieces, behavior_, out);
    });
  }
  // Known only for the GPT-2 and cl100k patterns, each match a piece.
  bool CutsBefore(const char32_t* s, size_t at) const override {
    const std::string& p = re_->source();
    return behavior_ == SplitBehavior::kIsolated && !invert_ && re_->literal() == nullptr &&
           (p == kGpt2Pattern || p == kCl100kPattern) && SpaceBetweenWords(s, at);
  }

 private:
  std::shared_ptr<const Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
};

class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void PreTokenize(std::vector<NormalizedString>& splits) const override {
    for (const auto& step : steps_) step->PreTokenize(splits);
  }
  // The later steps split each piece of the first on its own, the pieces
  // either side of a cut where it splits included.
  bool CutsBefore(const char32_t* s, size_t at) const override {
    return !steps_.empty() && steps_[0]->CutsBefore(s, at);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {}
  void PreTokenize(std::vector<NormalizedString>& splits) const override {
    thread_local std::vector<Piece> pieces;
    ScratchGuard guard(pieces);
    const std::vector<char32_t> prefix = {replacement_};
    SplitEach(splits, [&](NormalizedString& s, std::vector<NormalizedString>& out) {
      // One char for one: the replacement keeps the space's alignment.
      for (char32_t& c : s.chars) {
        if (c == ' ') c = replacement_;
      }
      const bool starts = !s.empty() && s.chars[0] == replacement_;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && s.origin == 0))) {
        s.Prepend(prefix);
      }
      if (!split_) {
        if (!s.empty()) out.push_back(std::move(s));
        return;
      }
      CharPieces(
          s, [&](char32_t c) { return c == replacement_; }, pieces);
      SplitPieces(s, pieces, SplitBehavior::kMergedWithNext, out);
    });
  }
  // Every replacement char (a space before) starts a word; a part that
  // starts with one gets no prefix.
  bool CutsBefore(const char32_t* s, size_t at) const override {
    return split_ && (s[at] == U' ' || s[at] == replacement_);
  }

 private:
  char32_t replacement_;
  PrependScheme scheme_;
  bool split_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::shared_ptr<const Regex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  void PreTokenize(std::vector<NormalizedString>& splits) const override {
    thread_local std::vector<Piece> pieces;
    ScratchGuard guard(pieces);
    const std::vector<char32_t> space = {U' '};
    SplitEach(splits, [&](NormalizedString& s, std::vector<NormalizedString>& out) {
      if (add_prefix_space_ && !s.empty() && s.chars[0] != ' ') s.Prepend(space);
      if (re_ == nullptr) {
        if (!s.empty()) out.push_back(std::move(s));
        return;
      }
      RegexPieces(s, *re_, false, pieces);
      SplitPieces(s, pieces, SplitBehavior::kIsolated, out);
    });
    for (NormalizedString& s : splits) ToByteChars(s);
  }
  bool CutsBefore(const char32_t* s, size_t at) const override {
    return re_ != nullptr && SpaceBetweenWords(s, at);
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> re_;
};

class FixedLength final : public PreTokenizer {
 public:
  explicit FixedLength(size_t length) : length_(length) {}
  void PreTokenize(std::vector<NormalizedString>& splits) const override {
    SplitEach(splits, [&](const NormalizedString& s, std::vector<NormalizedString>& out) {
      for (size_t i = 0; i < s.size(); i += length_) {
        out.push_back(s.Slice(i, std::min(s.size(), i + length_)));
      }
    });
  }

 private:
  size_t length_;
};

struct ByteTables {
  char32_t byte_char[256];
  ByteTables() {
    // Printable Latin-1 bytes stand for themselves; the others (controls,
    // space, soft hyphen...) take the code points from U+0100 up, in order.
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_char[b] = printable ? static_cast<char32_t>(b) : next++;
    }
  }
};
const ByteTables& Tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

char32_t ByteChar(unsigned char b) { return Tables().byte_char[b]; }

void ToByteChars(NormalizedString& s) {
  bool ascii = true;
  for (char32_t c : s.chars) ascii &= c < 0x80;
  if (ascii) {
    for (char32_t& c : s.chars) c = ByteChar(static_cast<unsigned char>(c));
    return;
  }
  std::vector<char32_t> chars;
  std::vector<Span> align;
  chars.reserve(s.size() * 2);
  align.reserve(s.size() * 2);
  for (size_t i = 0; i < s.size(); ++i) {
    char buf[4];
    const size_t n = AppendUtf8(s.chars[i], buf);
    for (size_t k = 0; k < n; ++k) {
      chars.push_back(ByteChar(static_cast<unsigned char>(buf[k])));
      align.push_back(s.align[i]);
    }
  }
  s.chars = std::move(chars);
  s.align = std::move(align);
}
int CharByte(char32_t c) {
  if (c < 0x100) {
    return ByteChar(static_cast<unsigned char>(c)) == c ? static_cast<int>(c) : -1;
  }
  if (c >= 0x100 + 68) return -1;  // 68 bytes are remapped
  for (int b = 0; b < 256; ++b) {
    if (ByteChar(static_cast<unsigned char>(b)) == c) return b;
  }
  return -1;
}

std::unique_ptr<PreTokenizer> MakeMetaspace(char32_t replacement, PrependScheme scheme,
                                            bool split) {
  return std::make_unique<Metaspace>(replacement, scheme, split);
}
std::unique_ptr<PreTokenizer> MakeByteLevel(bool add_prefix_space, bool use_regex) {
  std::shared_ptr<const Regex> re;
  if (use_regex) re = *Regex::Compile(kGpt2Pattern);  // a constant that compiles
  return std::make_unique<ByteLevel>(add_prefix_space, std::move(re));
}
std::unique_ptr<PreTokenizer> MakeSplit(std::shared_ptr<const Regex> pattern,
                                        SplitBehavior behavior, bool invert) {
  return std::make_unique<RegexSplit>(std::move(pattern), behavior, invert);
}
std::unique_ptr<PreTokenizer> MakeWhitespace() { return std::make_unique<WhitespaceRuns>(); }
std::unique_ptr<PreTokenizer> MakeWhitespaceSplit() {
  return MakeCharSplit(IsWhitespace, SplitBehavior::kRemoved);
}
std::unique_ptr<PreTokenizer> MakeBertPreTokenizer() {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(MakeCharSplit(IsWhitespace, SplitBehavior::kRemoved));
  steps.push_back(MakeCharSplit(IsPunct, SplitBehavior::kIsolated));
  return std::make_unique<PreTokenizerSequence>(std::move(steps));
}
std::unique_ptr<PreTokenizer> MakePunctuation(SplitBehavior behavior) {
  return MakeCharSplit(IsPunct, behavior);
}
std::unique_ptr<PreTokenizer> MakeDigits(bool individual) {
  return MakeCharSplit(IsNumeric,
                       individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
}
std::unique_ptr<PreTokenizer> MakeCharDelimiterSplit(char32_t delimiter) {
  return MakeCharSplit([delimiter](char32_t c) { return c == delimiter; }, SplitBehavior::kRemoved);
}
std::unique_ptr<PreTokenizer> MakeFixedLength(size_t length) {
  return std::make_unique<FixedLength>(length);
}
std::unique_ptr<PreTokenizer> MakePreTokenizerSequence(
    std::vector<std::unique_ptr<PreTokenizer>> steps) {
  return std::make_unique<PreTokenizerSequence>(std::move(steps));
}

}  // namespace bertrt::tokenizer

// Normalizers of the component pipeline. Each builds the (char, change) list
// HF's would hand to NormalizedString::transform, so alignments move exactly
// as there, quirks included.
#include <utf8proc.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "tokenizer/components.h"
#include "tokenizer/scratch.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {
namespace {

struct Range {
  char32_t first, last;
};
// Where HF's (older) Unicode tables for normalization and combining marks
// disagree with utf8proc's: marks and decompositions HF does not know, and
// chars whose mark category changed.
#include "tokenizer/component_exceptions.inc"

template <size_t N>
std::vector<bool> RangeTable(const Range (&ranges)[N]) {
  std::vector<bool> t(0x110000, false);
  for (const Range& r : ranges) {
    for (char32_t x = r.first; x <= r.last; ++x) t[x] = true;
  }
  return t;
}

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void Normalize(NormalizedString& s) const override {
    for (const auto& step : steps_) step->Normalize(s);
  }
  // Each step sees the chars the steps before it leave: only the first sees
  // the chars around the cut, the others the first char after it at most.
  bool CutsBefore(char32_t before, char32_t& at, char32_t next) const override {
    for (size_t k = 0; k < steps_.size(); ++k) {
      if (!steps_[k]->CutsBefore(k == 0 ? before : kUnknownChar, at, k == 0 ? next : kUnknownChar))
        return false;
    }
    return true;
  }
  // Later steps copy the alignments they are given, lag included; and a
  // later step that lags (Precompiled) makes no cut.
  std::optional<size_t> StartLag(const char32_t* chars, size_t n, bool whole) const override {
    return steps_.empty() ? 0 : steps_[0]->StartLag(chars, n, whole);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

bool Known(char32_t c) { return c < kTextEnd; }

class Lowercase final : public Normalizer {
 public:
  void Normalize(NormalizedString& s) const override {
    bool changed = false;
    for (char32_t c : s.chars) changed |= (CharFlags(c) & kHasLower) != 0;
    if (!changed) return;
    std::vector<CharChange> dest;
    dest.reserve(s.size());
    for (char32_t c : s.chars) {
      char32_t lower[3];
      const size_t n = ToLower(c, lower);
      for (size_t k = 0; k < n; ++k) dest.push_back({lower[k], k > 0 ? 1 : 0});
    }
    s.Transform(dest, 0);
  }
  // Char by char, and a char's first lowercase char replaces it.
  bool CutsBefore(char32_t, char32_t& at, char32_t) const override {
    if (Known(at)) {
      char32_t lower[3];
      ToLower(at, lower);
      at = lower[0];
    }
    return true;
  }
};

// HF's is_combining_mark: general category Mn, Mc or Me, in its tables.
bool IsCombiningMark(char32_t c) {
  static const std::vector<bool> not_mark = RangeTable(kNotCombiningMark);
  static const std::vector<bool> extra_mark = RangeTable(kExtraCombiningMark);
  if (not_mark[c]) return false;
  if (extra_mark[c]) return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

class StripAccents final : public Normalizer {
 public:
  // HF's filter keeps each remaining char's own alignment, so removing the
  // marks from both arrays is the whole transformation.
  void Normalize(NormalizedString& s) const override {
    size_t w = 0;
    for (size_t r = 0; r < s.size(); ++r) {
      if (s.chars[r] < 0x300 || !IsCombiningMark(s.chars[r])) {
        s.chars[w] = s.chars[r];
        s.align[w] = s.align[r];
        ++w;
      }
    }
    s.chars.resize(w);
    s.align.resize(w);
  }
  // A filter that keeps each char's own alignment.
  bool CutsBefore(char32_t, char32_t& at, char32_t) const override {
    if (Known(at) && at >= 0x300 && IsCombiningMark(at)) at = kUnknownChar;
    return true;
  }
};

// SentencePiece's NMT rule: ASCII controls dropped, other whitespace-like
// chars (and U+2581, U+FFFD) made spaces.
class Nmt final : public Normalizer {
 public:
  void Normalize(NormalizedString& s) const override {
    size_t w = 0;
    for (size_t r = 0; r < s.size(); ++r) {
      const char32_t c = s.chars[r];
      if (Dropped(c)) continue;
      s.chars[w] = Mapped(c);
      s.align[w] = s.align[r];
      ++w;
    }
    s.chars.resize(w);
    s.align.resize(w);
  }
  // A filter that keeps each char's own alignment.
  bool CutsBefore(char32_t, char32_t& at, char32_t) const override {
    if (Known(at)) at = Dropped(at) ? kUnknownChar : Mapped(at);
    return true;
  }

 private:
  static bool Dropped(char32_t c) {
    return (c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
           c == 0x8F || c == 0x9F;
  }
  static char32_t Mapped(char32_t c) {
    const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
                       (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 || c == 0x2581 ||
                       c == 0xFEFF || c == 0xFFFD;
    return space ? U' ' : c;
  }
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  void Normalize(NormalizedString& s) const override { ToByteChars(s); }
  // Char by char: each char's bytes, aligned as the char.
  bool CutsBefore(char32_t, char32_t& at, char32_t) const override {
    if (Known(at)) {
      char bytes[4];
      AppendUtf8(at, bytes);
      at = ByteChar(static_cast<unsigned char>(bytes[0]));
    }
    return true;
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(NormalizedString& s) const override { s.Strip(left_, right_); }

 private:
  bool left_, right_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::shared_ptr<const Regex> pattern, std::string content)
      : pattern_(std::move(pattern)) {
    DecodeUtf8(content, content_);
  }
  void Normalize(NormalizedString& s) const override {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    pattern_->FindAll(s.chars.data(), s.size(), matches);
    ScratchGuard guard(matches);
    s.ReplaceMatches(matches, content_);
  }
  // No match may hold the char after the cut: then none crosses it, and
  // both parts find the whole's matches. Known for a literal (its chars)
  // and for SentencePiece's " {2,}" (XLM-R, CamemBERT, ALBERT, T5), a run
  // of spaces; not for any other regex.
  bool CutsBefore(char32_t, char32_t& at, char32_t) const override {
    if (!Known(at)) return false;
    if (const std::vector<char32_t>* literal = pattern_->literal())
      return !literal->empty() && std::find(literal->begin(), literal->end(), at) == literal->end();
    return pattern_->source() == " {2,}" && at != U' ';
  }

 private:
  std::shared_ptr<const Regex> pattern_;
  std::vector<char32_t> content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(const std::string& prepend) { DecodeUtf8(prepend, prepend_); }
  void Normalize(NormalizedString& s) const override { s.Prepend(prepend_); }

 private:
  std::vector<char32_t> prepend_;
};

// Unicode normalization tables as HF's crate sees them: utf8proc's, less the
// chars it does not know.
class NormalizationTables {
 public:
  static const NormalizationTables& Get() {
    static const NormalizationTables t;
    return t;
  }
  bool Inert(char32_t c) const { return inert_[c]; }
  int Ccc(char32_t c) const {
    if (c < 0x300 || inert_[c]) return 0;
    return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
  }
  // Appends the full decomposition of c (canonical, or compatibility too).
  void Decompose(char32_t c, bool compat, std::vector<char32_t>& out) const {
    if (c < 0xA0 || inert_[c]) {
      out.push_back(c);
      return;
    }
    utf8proc_int32_t buf[32];
    utf8proc_int32_t last = 0;
    const int options = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32,
                                           static_cast<utf8proc_option_t>(options), &last);
    if (n <= 0 || n > 32) {
      out.push_back(c);
      return;
    }
    for (utf8proc_ssize_t i = 0; i < n; ++i) out.push_back(static_cast<char32_t>(buf[i]));
  }
  // Whether c is the second char of a composition (then it can join the
  // char before it).
  bool ComposesWithPrevious(char32_t c) const {
    constexpr char32_t kV = 0x1161, kT = 0x11A7;
    return (c >= kV && c < kV + 21) || (c > kT && c < kT + 28) || second_[c];
  }
  // The primary composite of a + b, or 0.
  char32_t Compose(char32_t a, char32_t b) const {
    // Hangul syllables compose algorithmically: L + V, then LV + T.
    constexpr char32_t kS = 0xAC00, kL = 0x1100, kV = 0x1161, kT = 0x11A7;
    if (a >= kL && a < kL + 19 && b >= kV && b < kV + 21) {
      return kS + ((a - kL) * 21 + (b - kV)) * 28;
    }
    if (a >= kS && a < kS + 11172 && (a - kS) % 28 == 0 && b > kT && b < kT + 28) {
      return a + (b - kT);
    }
    auto it = pairs_.find((static_cast<uint64_t>(a) << 32) | b);
    return it == pairs_.end() ? 0 : it->second;
  }

 private:
  NormalizationTables() : inert_(RangeTable(kNormalizationInert)), second_(0x110000, false) {
    // A primary composite is a char with a canonical decomposition that NFC
    // gives back (which leaves out singletons and exclusions); it composes
    // from the NFC of its decomposition's prefix and its last char.
    for (utf8proc_int32_t c = 0xC0; c < 0x30000; ++c) {
      if (inert_[c]) continue;
      const utf8proc_property_t* prop = utf8proc_get_property(c);
      if (prop->comp_exclusion || prop->decomp_type != 0) continue;
      utf8proc_int32_t buf[8];
      utf8proc_int32_t last = 0;
      const auto n = utf8proc_decompose_char(c, buf, 8, UTF8PROC_DECOMPOSE, &last);
      if (n < 2 || n > 8) continue;
      std::vector<char32_t> whole(buf, buf + n);
      if (Nfc(whole) != std::vector<char32_t>{static_cast<char32_t>(c)}) continue;
      const std::vector<char32_t> prefix = Nfc(std::vector<char32_t>(buf, buf + n - 1));
      if (prefix.size() != 1) continue;
      pairs_[(static_cast<uint64_t>(prefix[0]) << 32) | static_cast<uint32_t>(buf[n - 1])] =
          static_cast<char32_t>(c);
      second_[buf[n - 1]] = true;
    }
  }

  static std::vector<char32_t> Nfc(const std::vector<char32_t>& chars) {
    std::string utf8;
    for (char32_t c : chars) {
      char b[4];
      utf8.append(b, AppendUtf8(c, b));
    }
    utf8proc_uint8_t* out = nullptr;
    const auto len =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                     static_cast<utf8proc_ssize_t>(utf8.size()), &out,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    std::vector<char32_t> result;
    if (len >= 0 && out != nullptr) {
      DecodeUtf8(std::string_view(reinterpret_cast<const char*>(out), static_cast<size_t>(len)),
                 result);
    }
    std::free(out);
    return result;
  }

  std::vector<bool> inert_;
  std::vector<bool> second_;
  std::unordered_map<uint64_t, char32_t> pairs_;
};

// NFC/NFD/NFKC/NFKD as HF's unicode-normalization-alignments crate yields
// them, with the same (char, change) list: each char's decomposition (its
// first char replacing it, the rest inserted), marks sorted by combining
// class carrying their changes, and on composition the composite taking
// both changes less one (it absorbs the mark). HF then aligns positionally,
// which NormalizedString::Transform reproduces.
class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm form)
      : compat_(form == UnicodeForm::kNfkc || form == UnicodeForm::kNfkd),
        compose_(form == UnicodeForm::kNfc || form == UnicodeForm::kNfkc) {}

  void Normalize(NormalizedString& s) const override {
    bool plain = true;
    for (char32_t c : s.chars) plain &= c < 0xA0;
    if (plain) return;  // nothing below U+00A0 changes under any form
    const NormalizationTables& t = NormalizationTables::Get();
    thread_local std::vector<CharChange> dec;
    thread_local std::vector<char32_t> parts;
    thread_local std::vector<CharChange> out;
    ScratchGuard guard(dec, out);
    dec.clear();
    for (char32_t c : s.chars) {
      parts.clear();
      t.Decompose(c, compat_, parts);
      for (size_t k = 0; k < parts.size(); ++k) dec.push_back({parts[k], k > 0 ? 1 : 0});
    }
    // Canonical ordering: a stable sort of each run of marks by class.
    for (size_t i = 0; i < dec.size();) {
      if (t.Ccc(dec[i].c) == 0) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < dec.size() && t.Ccc(dec[j].c) != 0) ++j;
      std::stable_sort(
          dec.begin() + i, dec.begin() + j,
          [&](const CharChange& a, const CharChange& b) { return t.Ccc(a.c) < t.Ccc(b.c); });
      i = j;
    }
    if (!compose_) {
      s.Transform(dec, 0);
      return;
    }
    out.clear();
    long starter = -1;  // index in out of the last starter, while composable
    int last_ccc = -1;  // class of the last char kept after it (-1: none)
    for (const CharChange& d : dec) {
      const int ccc = t.Ccc(d.c);
      if (starter >= 0) {
        const bool blocked = last_ccc >= 0 && (last_ccc == 0 || last_ccc >= ccc);
        if (!blocked) {
          const char32_t composite = t.Compose(out[starter].c, d.c);
          if (composite != 0) {
            out[starter].c = composite;
            out[starter].change += d.change - 1;
            continue;
          }
        }
      }
      if (ccc == 0) {
        starter = static_cast<long>(out.size());
        last_ccc = -1;
      } else {
        last_ccc = ccc;
      }
      out.push_back(d);
    }
    s.Transform(out, 0);
  }
  // Decomposition is char by char and ordering stops at a starter; so is
  // composition, at a starter that composes with no char before it. A
  // composing form may still join that starter to chars after it: the
  // first char after the cut is then not known.
  bool CutsBefore(char32_t, char32_t& at, char32_t) const override {
    if (!Known(at)) return false;
    const NormalizationTables& t = NormalizationTables::Get();
    std::vector<char32_t> parts;
    t.Decompose(at, compat_, parts);
    if (t.Ccc(parts[0]) != 0 || (compose_ && t.ComposesWithPrevious(parts[0]))) return false;
    at = compose_ ? kUnknownChar : parts[0];
    return true;
  }

 private:
  bool compat_;
  bool compose_;
};

// --- Precompiled -----------------------------------------------------------

class Precompiled final : public Normalizer {
 public:
  static StatusOr<std::unique_ptr<Normalizer>> Create(std::string blob) {
    if (blob.size() < 4) return InvalidArgument("precompiled_charsmap is shorter than 4 bytes");
    uint32_t trie_bytes;
    std::memcpy(&trie_bytes, blob.data(), 4);  // little-endian, as SentencePiece writes it
    if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4) {
      return InvalidArgument("precompiled_charsmap: its trie size " + std::to_string(trie_bytes) +
                             " does not fit the " + std::to_string(blob.size()) + "-byte map");
    }
    std::unique_ptr<Precompiled> p(new Precompiled());
    p->units_.resize(trie_bytes / 4);
    std::memcpy(p->units_.data(), blob.data() + 4, trie_bytes);
    p->normalized_ = blob.substr(4 + trie_bytes);
    std::vector<char32_t> check;
    if (DecodeUtf8(p->normalized_, check) >= 0) {
      return InvalidArgument("precompiled_charsmap: its replacement strings are not valid UTF-8");
    }
    return std::unique_ptr<Normalizer>(std::move(p));
  }

  void Normalize(NormalizedString& s) const override {
    thread_local std::vector<CharChange> dest;
    ScratchGuard guard(dest);
    dest.clear();
    bool modified = false;
    Walk(s.chars.data(), s.size(), [&](size_t b, size_t e, size_t, const Chars* replacement) {
      if (replacement == nullptr) {
        dest.push_back({s.chars[b], 0});
      } else {
        modified = true;
        Replace(dest, e - b, *replacement);
      }
      return true;
    });
    if (modified) s.Transform(dest, 0);
  }
  // Graphemes are looked up one by one: a cut between two chars that break
  // as Other whatever came before (no Prepend, Extend, emoji or regional
  // indicator rule applies) splits none, and the char after it is a
  // grapheme of its own unless the next char extends it. Its replacement
  // must not be empty, for StartLag's reason.
  bool CutsBefore(char32_t before, char32_t& at, char32_t next) const override {
    if (!Known(before) || !Known(at) || next == kUnknownChar) return false;
    auto other = [](char32_t c) {
      return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->boundclass ==
             UTF8PROC_BOUNDCLASS_OTHER;
    };
    if (!other(before) || !other(at)) return false;
    if (next != kTextEnd) {
      int32_t state = UTF8PROC_BOUNDCLASS_OTHER;  // what `at` leaves, it being Other
      if (!utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(at),
                                            static_cast<utf8proc_int32_t>(next), &state))
        return false;
    }
    char bytes[4];
    Chars replacement;
    if (Lookup(bytes, AppendUtf8(at, bytes), replacement)) {
      if (replacement.empty()) return false;
      at = replacement[0];
    }
    return true;
  }
  // Replace() makes the char pushed last take a removal; at a text's start
  // there is none, and HF (as SentencePiece) loses the removal: every char
  // after aligns as many old chars early as were removed before its first
  // char out.
  std::optional<size_t> StartLag(const char32_t* chars, size_t n, bool whole) const override {
    std::optional<size_t> lag;
    Walk(chars, n, [&](size_t b, size_t, size_t grapheme_end, const Chars* replacement) {
      if (replacement != nullptr && replacement->empty()) return true;
      if (grapheme_end < n || whole) lag = b;
      return false;
    });
    if (!lag && whole) lag = n;
    return lag;
  }

 private:
  Precompiled() = default;

  using Chars = std::vector<char32_t>;

  // HF's walk over the extended grapheme clusters: a cluster under 6 bytes
  // is looked up whole, then (or else) each of its chars, HF's order (and
  // SentencePiece's), kept even where it looks odd (a match of a prefix
  // replaces the whole grapheme). Calls part(begin, end, grapheme_end,
  // replacement) for each piece looked up, replacement null for one that
  // stays; stops where `part` returns false.
  template <typename F>
  void Walk(const char32_t* s, size_t n, F&& part) const {
    thread_local Chars replacement;
    int32_t state = 0;
    char bytes[64];
    for (size_t b = 0; b < n;) {
      size_t e = b + 1;
      while (e < n && !Break(s[e - 1], s[e], state)) ++e;
      size_t len = 0;
      for (size_t i = b; i < e && len + 4 <= sizeof(bytes); ++i)
        len += AppendUtf8(s[i], bytes + len);
      if (len < 6 && Lookup(bytes, len, replacement)) {
        if (!part(b, e, e, &replacement)) return;
      } else {
        for (size_t i = b; i < e; ++i) {
          const bool found = Lookup(bytes, AppendUtf8(s[i], bytes), replacement);
          if (!part(i, i + 1, e, found ? &replacement : nullptr)) return;
        }
      }
      b = e;
    }
  }

  static bool Break(char32_t a, char32_t b, int32_t& state) {
    if (a < 0x80 && b < 0x80) {
      state = 0;
      return !(a == '\r' && b == '\n');
    }
    return utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(a),
                                            static_cast<utf8proc_int32_t>(b), &state);
  }

  // The replacement of the shortest key that is a prefix of s[0, n) (the
  // darts-clone double array's common-prefix search, first result).
  bool Lookup(const char* s, size_t n, std::vector<char32_t>& out) const {
    const size_t size = units_.size();
    size_t pos = Offset(units_[0]);
    for (size_t i = 0; i < n; ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c == 0) return false;
      pos ^= c;
      if (pos >= size) return false;
      const uint32_t unit = units_[pos];
      if ((unit & ((1u << 31) | 0xFF)) != c) return false;
      pos ^= Offset(unit);
      if (pos >= size) return false;
      if ((unit >> 8) & 1) {
        const size_t value = units_[pos] & 0x7FFFFFFFu;
        if (value > normalized_.size()) return false;
        const size_t end = normalized_.find('\0', value);
        const std::string_view rep(normalized_.data() + value,
                                   (end == std::string::npos ? normalized_.size() : end) - value);
        DecodeUtf8(rep, out);
        return true;
      }
    }
    return false;
  }
  static size_t Offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

  // HF's rule for a replaced run of `old_count` chars: every new char replaces
  // one; extra new chars are inserted at the end; a shorter replacement makes
  // the last char pushed so far remove the difference.
  static void Replace(std::vector<CharChange>& dest, size_t old_count,
                      const std::vector<char32_t>& rep) {
    for (char32_t c : rep) dest.push_back({c, 0});
    const auto diff = static_cast<long>(rep.size()) - static_cast<long>(old_count);
    if (diff > 0) {
      for (long k = 0; k < diff; ++k) dest[dest.size() - 1 - k].change = 1;
    } else if (diff < 0 && !dest.empty()) {
      dest.back().change += static_cast<int32_t>(diff);
    }
  }

  std::vector<uint32_t> units_;
  std::string normalized_;
};

}  // namespace

std::unique_ptr<Normalizer> MakeUnicodeNormalizer(UnicodeForm form) {
  return std::make_unique<UnicodeNormalizer>(form);
}
std::unique_ptr<Normalizer> MakeLowercase() { return std::make_unique<Lowercase>(); }
std::unique_ptr<Normalizer> MakeNmt() { return std::make_unique<Nmt>(); }
std::unique_ptr<Normalizer> MakeByteLevelNormalizer() {
  return std::make_unique<ByteLevelNormalizer>();
}
std::unique_ptr<Normalizer> MakeStripAccents() { return std::make_unique<StripAccents>(); }
std::unique_ptr<Normalizer> MakeStrip(bool left, bool right) {
  return std::make_unique<Strip>(left, right);
}
std::unique_ptr<Normalizer> MakeReplace(std::shared_ptr<const Regex> pattern, std::string content) {
  return std::make_unique<Replace>(std::move(pattern), std::move(content));
}
std::unique_ptr<Normalizer> MakePrepend(std::string prepend) {
  return std::make_unique<Prepend>(prepend);
}
std::unique_ptr<Normalizer> MakeNormalizerSequence(std::vector<std::unique_ptr<Normalizer>> steps) {
  return std::make_unique<Sequence>(std::move(steps));
}
StatusOr<std::unique_ptr<Normalizer>> MakePrecompiled(std::string charsmap) {
  return Precompiled::Create(std::move(charsmap));
}

}  // namespace bertrt::tokenizer

// Normalizers of the component pipeline. Each builds the (char, change) list
// HF's would hand to NormalizedString::transform, so alignments move exactly
// as there, quirks included.
#include <utf8proc.h>

#include <cstring>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {
namespace {

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void Normalize(NormalizedString& s) const override {
    for (const auto& step : steps_) step->Normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

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
};

bool IsCombiningMark(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
         cat == UTF8PROC_CATEGORY_ME;
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
  Replace(std::shared_ptr<const Regex> pattern, std::string content) : pattern_(std::move(pattern)) {
    DecodeUtf8(content, content_);
  }
  void Normalize(NormalizedString& s) const override {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    pattern_->FindAll(s.chars.data(), s.size(), matches);
    s.ReplaceMatches(matches, content_);
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

// utf8proc over one run of chars, as UTF-32.
std::vector<char32_t> Utf8procMap(const char32_t* chars, size_t n, int options) {
  std::string utf8;
  for (size_t i = 0; i < n; ++i) {
    char buf[4];
    utf8.append(buf, AppendUtf8(chars[i], buf));
  }
  utf8proc_uint8_t* out = nullptr;
  const auto len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                                static_cast<utf8proc_ssize_t>(utf8.size()), &out,
                                static_cast<utf8proc_option_t>(options));
  std::vector<char32_t> result;
  if (len >= 0 && out != nullptr) {
    DecodeUtf8(std::string_view(reinterpret_cast<const char*>(out), static_cast<size_t>(len)),
               result);
  } else {
    result.assign(chars, chars + n);  // utf8proc refuses only invalid input
  }
  std::free(out);
  return result;
}

// A char that normalization never joins to the char before it: combining
// class 0 and not a Hangul vowel or final jamo (which compose with the
// syllable before them).
bool StartsRun(char32_t c) {
  if ((c >= 0x1161 && c <= 0x1175) || (c >= 0x11A8 && c <= 0x11C2)) return false;
  return c < 0x300 || CombiningClass(c) == 0;
}

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm form) {
    options_ = UTF8PROC_STABLE;
    switch (form) {
      case UnicodeForm::kNfc: options_ |= UTF8PROC_COMPOSE; break;
      case UnicodeForm::kNfd: options_ |= UTF8PROC_DECOMPOSE; break;
      case UnicodeForm::kNfkc: options_ |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case UnicodeForm::kNfkd: options_ |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
  }
  // Normalizes run by run (a starter and the marks after it) and aligns each
  // run's output positionally, as HF's (char, change) list does: the first
  // outputs replace the run's chars one for one, extra ones are inserted,
  // and a shorter output's last char removes the rest.
  void Normalize(NormalizedString& s) const override {
    const size_t n = s.size();
    std::vector<CharChange> dest;
    dest.reserve(n);
    bool changed = false;
    for (size_t b = 0; b < n;) {
      size_t e = b + 1;
      while (e < n && !StartsRun(s.chars[e])) ++e;
      if (e == b + 1 && s.chars[b] < 0xA0) {  // ASCII and Latin-1 controls are stable
        dest.push_back({s.chars[b], 0});
        b = e;
        continue;
      }
      const std::vector<char32_t> out = Utf8procMap(s.chars.data() + b, e - b, options_);
      const size_t in = e - b;
      changed |= out.size() != in || !std::equal(out.begin(), out.end(), s.chars.begin() + b);
      for (size_t k = 0; k < out.size(); ++k) {
        int change = k < in ? 0 : 1;
        if (k + 1 == out.size() && out.size() < in) change = -static_cast<int>(in - out.size());
        dest.push_back({out[k], change});
      }
      if (out.empty() && !dest.empty()) dest.back().change -= static_cast<int>(in);
      b = e;
    }
    if (changed) s.Transform(dest, 0);
  }

 private:
  int options_;
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
    const size_t n = s.size();
    thread_local std::vector<CharChange> dest;
    thread_local std::vector<char32_t> replacement;
    dest.clear();
    bool modified = false;
    int32_t state = 0;
    char bytes[64];
    for (size_t b = 0; b < n;) {
      // The extended grapheme cluster [b, e).
      size_t e = b + 1;
      while (e < n && !Break(s.chars[e - 1], s.chars[e], state)) ++e;
      size_t len = 0;
      for (size_t i = b; i < e && len + 4 <= sizeof(bytes); ++i) {
        len += AppendUtf8(s.chars[i], bytes + len);
      }
      // Whole graphemes under 6 bytes are looked up first, then each char:
      // HF's order (and SentencePiece's), kept even where it looks odd (a
      // match of a prefix replaces the whole grapheme).
      if (len < 6 && Lookup(bytes, len, replacement)) {
        modified = true;
        Replace(dest, e - b, replacement);
      } else {
        for (size_t i = b; i < e; ++i) {
          const size_t clen = AppendUtf8(s.chars[i], bytes);
          if (Lookup(bytes, clen, replacement)) {
            modified = true;
            Replace(dest, 1, replacement);
          } else {
            dest.push_back({s.chars[i], 0});
          }
        }
      }
      b = e;
    }
    if (modified) s.Transform(dest, 0);
  }

 private:
  Precompiled() = default;

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

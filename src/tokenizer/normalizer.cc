#include "tokenizer/normalizer.h"

#include <utility>

#include "tokenizer/unicode.h"

namespace bertrt::tokenizer {
namespace {

class Writer {
 public:
  Writer(const NormalizerOptions& o, NormalizedText& out, size_t reserve) : o_(o), out_(out) {
    n_ = out.chars.size();
    out.chars.resize(n_ + reserve);
    out.source.resize(n_ + reserve);
    chars_ = out.chars.data();
    source_ = out.source.data();
    run_start_ = n_;
  }
  ~Writer() {
    out_.chars.resize(n_);
    out_.source.resize(n_);
  }

  // Runs strip_accents and lowercase on one (cleaned, padded) char.
  void Emit(char32_t c, uint32_t src) {
    const uint8_t f = CharFlags(c);
    if (!o_.strip_accents || !(f & (kDecomposes | kNonspacingMark))) {
      Lower(c, f, src);
      run_start_ = n_;
      return;
    }
    char32_t parts[8];
    const size_t count = (f & kDecomposes) ? Decompose(c, parts) : (parts[0] = c, 1);
    for (size_t i = 0; i < count; ++i) {
      const char32_t d = parts[i];
      const int ccc = CombiningClass(d);
      if (CharFlags(d) & kNonspacingMark) {
        if (ccc == 0) run_start_ = n_;
        continue;
      }
      const size_t at = n_;
      Lower(d, CharFlags(d), src);
      if (ccc == 0) {
        run_start_ = n_;
      } else {
        Reorder(at, ccc);
      }
    }
  }

 private:
  void Lower(char32_t c, uint8_t f, uint32_t src) {
    if (o_.lowercase && (f & kHasLower)) {
      char32_t lower[3];
      const size_t m = ToLower(c, lower);
      for (size_t i = 0; i < m; ++i) Put(lower[i], src);
    } else {
      Put(c, src);
    }
  }
  void Put(char32_t c, uint32_t src) {
    chars_[n_] = c;
    source_[n_] = src;
    ++n_;
  }
  // Canonical ordering: a combining mark moves before marks of a higher class
  // in the same run (a stable sort by combining class).
  void Reorder(size_t at, int ccc) {
    while (at > run_start_ && CombiningClass(chars_[at - 1]) > ccc) {
      std::swap(chars_[at - 1], chars_[at]);
      std::swap(source_[at - 1], source_[at]);
      --at;
    }
  }

  const NormalizerOptions& o_;
  NormalizedText& out_;
  char32_t* chars_;
  uint32_t* source_;
  size_t n_;
  size_t run_start_;
};

}  // namespace

bool CutsBefore(const NormalizerOptions& o, char32_t c) {
  if (!o.strip_accents) return true;
  const uint8_t f = CharFlags(c);
  // A dropped char leaves the marks either side in one run.
  if (o.clean_text && (f & kDrop)) return false;
  char32_t parts[8] = {c};
  if (f & kDecomposes) Decompose(c, parts);
  return CombiningClass(parts[0]) == 0;
}

void Normalize(const NormalizerOptions& o, const char32_t* in, uint32_t begin, uint32_t end,
               NormalizedText& out) {
  // At most 4 chars per input char: a canonical decomposition (up to 4),
  // or CJK padding (3).
  Writer w(o, out, 4 * static_cast<size_t>(end - begin));
  for (uint32_t i = begin; i < end; ++i) {
    char32_t c = in[i];
    const uint8_t f = CharFlags(c);
    if (o.clean_text) {
      if (f & kDrop) continue;
      if (f & kCleanSpace) c = ' ';
    }
    if (o.handle_chinese_chars && (f & kCjk)) {
      w.Emit(' ', i);
      w.Emit(c, i);
      w.Emit(' ', i);
    } else {
      w.Emit(c, i);
    }
  }
}

}  // namespace bertrt::tokenizer

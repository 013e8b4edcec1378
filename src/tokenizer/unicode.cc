#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>
#include <memory>

namespace bertrt::tokenizer {
namespace {

constexpr char32_t kMaxCodePoint = 0x110000;

struct Range {
  char32_t first, last;
};

struct LowerPair {
  char32_t from, to;
};

// HF's is_chinese_char ranges (note 0x2B820..0x2B91F is not among them).
constexpr Range kCjkRanges[] = {
    {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xF900, 0xFAFF},   {0x20000, 0x2A6DF},
    {0x2A700, 0x2B81F}, {0x2B920, 0x2CEAF}, {0x2F800, 0x2FA1F},
};

// Rust's char::is_whitespace (the White_Space property; stable for years).
constexpr Range kRustWhitespace[] = {
    {0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
    {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
    {0x205F, 0x205F}, {0x3000, 0x3000},
};

// Where HF's Unicode tables disagree with utf8proc's: its category and NFD
// crates predate recently assigned or recategorised characters, while Rust's
// std lowercases characters newer than utf8proc knows. Derived by comparing
// every code point against `tokenizers`.
#include "tokenizer/unicode_exceptions.inc"

bool InRanges(char32_t c, const Range* begin, const Range* end) {
  for (const Range* r = begin; r != end; ++r) {
    if (c >= r->first && c <= r->last) return true;
  }
  return false;
}

template <size_t N>
void Apply(uint8_t* table, const Range (&ranges)[N], uint8_t flag, bool set) {
  for (const Range& r : ranges) {
    for (char32_t c = r.first; c <= r.last; ++c) {
      table[c] = set ? (table[c] | flag) : (table[c] & ~flag);
    }
  }
}

bool IsAsciiPunct(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
}

std::unique_ptr<uint8_t[]> BuildTable() {
  auto table = std::make_unique<uint8_t[]>(kMaxCodePoint);
  for (char32_t c = 0; c < kMaxCodePoint; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) {
      table[c] = 0;
      continue;
    }
    const auto* prop = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
    const auto cat = static_cast<utf8proc_category_t>(prop->category);
    uint8_t f = 0;
    const bool tab_or_newline = c == '\t' || c == '\n' || c == '\r';
    const bool other = cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
                       cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS;
    if (c == 0 || c == 0xFFFD || (other && !tab_or_newline)) f |= kDrop;
    const bool ws = InRanges(c, std::begin(kRustWhitespace), std::end(kRustWhitespace));
    if (ws) f |= kWhitespace;
    if (ws || tab_or_newline) f |= kCleanSpace;
    if (InRanges(c, std::begin(kCjkRanges), std::end(kCjkRanges))) f |= kCjk;
    if (IsAsciiPunct(c) || (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO)) {
      f |= kPunct;
    }
    if (cat == UTF8PROC_CATEGORY_MN) f |= kNonspacingMark;
    utf8proc_int32_t buf[8];
    int last_boundclass = 0;
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 8,
                                           UTF8PROC_DECOMPOSE, &last_boundclass);
    if (n > 1 || (n == 1 && static_cast<char32_t>(buf[0]) != c) || prop->combining_class != 0) {
      f |= kDecomposes;
    }
    if (utf8proc_tolower(static_cast<utf8proc_int32_t>(c)) != static_cast<utf8proc_int32_t>(c) ||
        c == 0x130) {
      f |= kHasLower;
    }
    table[c] = f;
  }
  Apply(table.get(), kNotDrop, kDrop, false);
  Apply(table.get(), kNotPunct, kPunct, false);
  Apply(table.get(), kExtraPunct, kPunct, true);
  Apply(table.get(), kNotNonspacingMark, kNonspacingMark, false);
  Apply(table.get(), kExtraNonspacingMark, kNonspacingMark, true);
  Apply(table.get(), kNoDecomposition, kDecomposes, false);
  for (const LowerPair& p : kExtraLower) table[p.from] |= kHasLower;
  return table;
}

const uint8_t* Table() {
  static const std::unique_ptr<uint8_t[]> table = BuildTable();
  return table.get();
}

}  // namespace

uint8_t CharFlags(char32_t c) { return c < kMaxCodePoint ? Table()[c] : 0; }

size_t Decompose(char32_t c, char32_t* out) {
  utf8proc_int32_t buf[8];
  int last_boundclass = 0;
  const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 8,
                                         UTF8PROC_DECOMPOSE, &last_boundclass);
  if (n <= 0 || n > 8) {
    out[0] = c;
    return 1;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) out[i] = static_cast<char32_t>(buf[i]);
  return static_cast<size_t>(n);
}

int CombiningClass(char32_t c) {
  // Marks newer than HF's NFD tables have class 0 there: they never reorder.
  if (InRanges(c, std::begin(kNotNonspacingMark), std::end(kNotNonspacingMark))) return 0;
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
}

size_t ToLower(char32_t c, char32_t* out) {
  // The one unconditional multi-char lowercase mapping in SpecialCasing.txt.
  if (c == 0x130) {
    out[0] = 'i';
    out[1] = 0x307;
    return 2;
  }
  const auto* it = std::lower_bound(std::begin(kExtraLower), std::end(kExtraLower), c,
                                    [](const LowerPair& p, char32_t v) { return p.from < v; });
  if (it != std::end(kExtraLower) && it->from == c) {
    out[0] = it->to;
    return 1;
  }
  out[0] = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
  return 1;
}

bool IsWordChar(char32_t c) {
  if (c == '_') return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

}  // namespace bertrt::tokenizer

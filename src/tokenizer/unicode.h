// Per-code-point character classes for the BERT normalizer and pre-tokenizer,
// matching what HF `tokenizers` computes with Rust's std and the
// `unicode_categories` / `unicode-normalization-alignments` crates.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bertrt::tokenizer {

enum CharFlag : uint8_t {
  kDrop = 1 << 0,        // removed by clean_text (\0, U+FFFD, Cc/Cf/Co but \t\n\r)
  kCleanSpace = 1 << 1,  // turned into ' ' by clean_text
  kCjk = 1 << 2,         // padded with spaces by handle_chinese_chars
  kWhitespace = 1 << 3,  // Rust char::is_whitespace: the pre-tokenizer splits here
  kPunct = 1 << 4,       // isolated by the pre-tokenizer
  kNonspacingMark = 1 << 5,  // removed by strip_accents (after NFD)
  kDecomposes = 1 << 6,  // has a canonical decomposition (or is a mark that reorders)
  kHasLower = 1 << 7,    // to_lowercase differs from the char
};

// Flags of a code point (< 0x110000). The table is built on first use.
uint8_t CharFlags(char32_t c);

// Canonical (NFD) decomposition of `c` into `out` (room for 8); returns the
// count. Only meaningful when CharFlags(c) & kDecomposes.
size_t Decompose(char32_t c, char32_t* out);
// Canonical combining class, for the NFD reordering step.
int CombiningClass(char32_t c);
// Rust char::to_lowercase into `out` (room for 3); returns the count.
size_t ToLower(char32_t c, char32_t* out);
// Rust char::is_alphanumeric (approximated by the L* and N* categories),
// used by added tokens with single_word.
bool IsWordChar(char32_t c);

}  // namespace bertrt::tokenizer

// HF's BertPreTokenizer: split on Rust char::is_whitespace (dropped), then
// isolate every punctuation char (ASCII punctuation or a Unicode P* category,
// by HF's tables) as a word of its own.
#pragma once

#include <cstdint>

#include "tokenizer/unicode.h"

namespace bertrt::tokenizer {

// Calls on_word(begin, end) for each word of chars[begin, end), in order.
template <typename OnWord>
void PreTokenize(const char32_t* chars, uint32_t begin, uint32_t end, OnWord&& on_word) {
  uint32_t word = begin;
  for (uint32_t i = begin; i < end; ++i) {
    const uint8_t f = CharFlags(chars[i]);
    if (!(f & (kWhitespace | kPunct))) continue;
    if (word < i) on_word(word, i);
    if (f & kPunct) on_word(i, i + 1);
    word = i + 1;
  }
  if (word < end) on_word(word, end);
}

}  // namespace bertrt::tokenizer

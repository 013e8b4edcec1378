// UTF-8 decoding with Rust's validity rules (no overlongs, surrogates or code
// points past U+10FFFF), and encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace bertrt::tokenizer {

// The code point of the multi-byte sequence that starts at p[i] (a lead byte
// of 0x80 or more) within p's n bytes, and its length; 0 when it is invalid.
inline size_t DecodeMultiByte(const unsigned char* p, size_t n, size_t i, char32_t& c) {
  const unsigned char b = p[i];
  size_t len;
  char32_t min;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2, c = b & 0x1F, min = 0x80;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3, c = b & 0x0F, min = 0x800;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4, c = b & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (p[i + k] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  return len;
}

// Decodes `s` into `out` (resized to the number of code points). Returns the
// byte offset of the first invalid sequence, or -1 when `s` is valid.
inline ptrdiff_t DecodeUtf8(std::string_view s, std::vector<char32_t>& out) {
  out.resize(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  char32_t* dst = out.data();
  size_t i = 0;
  while (i < n) {
    // ASCII runs, eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      for (int k = 0; k < 8; ++k) *dst++ = p[i + k];
      i += 8;
    }
    if (i >= n) break;
    const unsigned char b = p[i];
    if (b < 0x80) {
      *dst++ = b;
      ++i;
      continue;
    }
    char32_t c;
    const size_t len = DecodeMultiByte(p, n, i, c);
    if (len == 0) return static_cast<ptrdiff_t>(i);
    *dst++ = c;
    i += len;
  }
  out.resize(static_cast<size_t>(dst - out.data()));
  return -1;
}

// DecodeUtf8's check without the decoding, for a text read piece by piece:
// the byte offset of the first invalid sequence, or -1 with `chars` the
// number of code points.
inline ptrdiff_t ValidateUtf8(std::string_view s, size_t& chars) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t count = 0;
  size_t i = 0;
  while (i < n) {
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
      count += 8;
    }
    if (i >= n) break;
    const unsigned char b = p[i];
    ++count;
    if (b < 0x80) {
      ++i;
      continue;
    }
    char32_t c;
    const size_t len = DecodeMultiByte(p, n, i, c);
    if (len == 0) return static_cast<ptrdiff_t>(i);
    i += len;
  }
  chars = count;
  return -1;
}

// Length of the UTF-8 sequence that starts with `lead` (valid UTF-8 assumed).
inline size_t Utf8Length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The code point at s[i] (valid UTF-8 assumed, i at a char's first byte).
inline char32_t Utf8CharAt(const char* s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s + i);
  const size_t len = Utf8Length(p[0]);
  if (len == 1) return p[0];
  char32_t c = p[0] & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (p[k] & 0x3F);
  return c;
}

// The byte offset of the char before the one at s[i] (valid UTF-8, i > 0).
inline size_t Utf8PreviousChar(const char* s, size_t i) {
  do {
    --i;
  } while ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
  return i;
}

// Appends the UTF-8 encoding of `c`; returns the number of bytes.
inline size_t AppendUtf8(char32_t c, char* out) {
  if (c < 0x80) {
    out[0] = static_cast<char>(c);
    return 1;
  }
  if (c < 0x800) {
    out[0] = static_cast<char>(0xC0 | (c >> 6));
    out[1] = static_cast<char>(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (c >> 12));
    out[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (c >> 18));
  out[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (c & 0x3F));
  return 4;
}

}  // namespace bertrt::tokenizer

#include "tokenizer/wordpiece.h"

#include <algorithm>
#include <string_view>

#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {

void WordPiece::Tokenize(const NormalizedText& text, uint32_t begin, uint32_t end,
                         WordScratch& s, TokenList& out) const {
  const uint32_t* src = text.source.data();
  const size_t n_chars = end - begin;
  if (n_chars > max_chars_) {
    out.Push(unk_id_, src[begin], src[end - 1] + 1);
    return;
  }
  if (s.bytes.size() < 4 * n_chars) {
    s.bytes.resize(4 * n_chars);
    s.byte_char.resize(4 * n_chars);
  }
  char* bytes = s.bytes.data();
  uint32_t* byte_char = s.byte_char.data();
  size_t len = 0;
  for (size_t k = 0; k < n_chars; ++k) {
    const char32_t c = text.chars[begin + k];
    if (c < 0x80) {
      bytes[len] = static_cast<char>(c);
      byte_char[len++] = static_cast<uint32_t>(k);
    } else {
      const size_t m = AppendUtf8(c, bytes + len);
      for (size_t j = 0; j < m; ++j) byte_char[len + j] = static_cast<uint32_t>(k);
      len += m;
    }
  }

  // No vocabulary entry is longer than max_token_bytes, so longer candidates
  // (which HF tries first) can be skipped without changing the result.
  const size_t max_bytes = vocab_->max_token_bytes();
  if (s.hashes.size() < max_bytes + 1) s.hashes.resize(max_bytes + 1);
  uint64_t* hashes = s.hashes.data();
  const size_t mark = out.ids.size();
  const bool starts_word = out.next_starts_word;
  size_t start = 0;
  while (start < len) {
    const std::string_view prefix = start > 0 ? std::string_view(prefix_) : std::string_view();
    if (prefix.size() >= max_bytes) break;
    const size_t limit = std::min(len, start + (max_bytes - prefix.size()));
    HashStream h;
    h.Add(prefix);
    for (size_t e = start; e < limit; ++e) {
      h.Add(static_cast<unsigned char>(bytes[e]));
      hashes[e + 1 - start] = h.Finish();
    }
    int32_t id = -1;
    size_t stop = limit;
    for (; stop > start; --stop) {
      if (stop < len && (static_cast<unsigned char>(bytes[stop]) & 0xC0) == 0x80) continue;
      id = vocab_->Find(hashes[stop - start], prefix,
                        std::string_view(bytes + start, stop - start));
      if (id >= 0) break;
    }
    if (id < 0) break;
    out.Push(id, src[begin + byte_char[start]], src[begin + byte_char[stop - 1]] + 1);
    start = stop;
  }
  if (start < len) {
    out.Resize(mark);
    out.next_starts_word = starts_word;
    out.Push(unk_id_, src[begin], src[end - 1] + 1);
  }
}

}  // namespace bertrt::tokenizer

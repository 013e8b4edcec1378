#include "serving/text_span.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace bertrt::serving {

CodePointText::CodePointText(std::string_view utf8) : text_(utf8) {
  for (size_t i = 0; i < utf8.size(); i += tokenizer::Utf8Length(utf8[i])) starts_.push_back(i);
  starts_.push_back(utf8.size());
}

std::string_view CodePointText::Slice(size_t begin, size_t end) const {
  end = std::min(end, size());
  begin = std::min(begin, end);
  return text_.substr(starts_[begin], starts_[end] - starts_[begin]);
}

char32_t CodePointText::At(size_t i) const {
  return i < size() ? tokenizer::Utf8CharAt(text_.data(), starts_[i]) : 0;
}

size_t CountCodePoints(std::string_view utf8) {
  size_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Lowercase(std::string_view utf8) {
  std::string out;
  char32_t lower[3];
  char buf[4];
  for (size_t i = 0; i < utf8.size(); i += tokenizer::Utf8Length(utf8[i])) {
    const size_t n = tokenizer::ToLower(tokenizer::Utf8CharAt(utf8.data(), i), lower);
    for (size_t k = 0; k < n; ++k) out.append(buf, tokenizer::AppendUtf8(lower[k], buf));
  }
  return out;
}

}  // namespace bertrt::serving

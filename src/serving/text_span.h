// A text addressed in Unicode code points, as tokenizers' offsets and HF
// pipelines' start/end are (Python string indices), over its UTF-8 bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bertrt::serving {

class CodePointText {
 public:
  // `utf8` must be valid UTF-8 (a text the tokenizer accepted) and outlive this.
  explicit CodePointText(std::string_view utf8);
  size_t size() const { return starts_.size() - 1; }
  // Code points [begin, end), clamped to the text.
  std::string_view Slice(size_t begin, size_t end) const;
  // The code point at i (0 past the end).
  char32_t At(size_t i) const;

 private:
  std::string_view text_;
  std::vector<size_t> starts_;  // byte offset of each code point, then the text's size
};

// Code points in a UTF-8 string.
size_t CountCodePoints(std::string_view utf8);

// Python's str.lower() of UTF-8 text, as far as Unicode's case mappings go.
std::string Lowercase(std::string_view utf8);

}  // namespace bertrt::serving

// Regular expressions for the Split pre-tokenizer, ByteLevel's GPT-2 split and
// the Replace normalizer, through Oniguruma: the engine HF `tokenizers` itself
// uses, with the same (default) syntax, so \p{L}, \s, lookaheads and (?i:)
// mean what they mean there. Patterns and subjects are UTF-32, the pipeline's
// own representation, so match positions are char indices without a map.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bertrt/status.h"

namespace bertrt::tokenizer {

class Regex {
 public:
  // A regex from its UTF-8 source; InvalidArgument with Oniguruma's message
  // when it does not compile.
  static StatusOr<std::shared_ptr<const Regex>> Compile(std::string_view pattern);
  // A regex matching `literal` exactly (HF's String patterns).
  static StatusOr<std::shared_ptr<const Regex>> Literal(std::string_view literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match [begin, end) in text[0, n), left to right, as the onig
  // crate's find_iter gives them (an empty match right after the previous
  // match is skipped).
  void FindAll(const char32_t* text, size_t n, std::vector<std::pair<size_t, size_t>>& out) const;

  // The pattern as given (UTF-8), and for Literal the string it matches:
  // what the bounded encoder reads to know where matches can fall.
  const std::string& source() const { return source_; }
  const std::vector<char32_t>* literal() const { return is_literal_ ? &literal_ : nullptr; }

 private:
  Regex(void* re, std::string source) : re_(re), source_(std::move(source)) {}
  static StatusOr<void*> CompileOniguruma(std::string_view pattern);
  void* re_;  // regex_t*, kept opaque so that callers need no Oniguruma header
  std::string source_;
  bool is_literal_ = false;
  std::vector<char32_t> literal_;
};

}  // namespace bertrt::tokenizer

#include "tokenizer/regex.h"

#include <oniguruma.h>

#include <mutex>

#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {
namespace {

void InitOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF32_LE};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

StatusOr<std::shared_ptr<const Regex>> Regex::Compile(std::string_view pattern) {
  ASSIGN_OR_RETURN(void* re, CompileOniguruma(pattern));
  return std::shared_ptr<const Regex>(new Regex(re, std::string(pattern)));
}

StatusOr<void*> Regex::CompileOniguruma(std::string_view pattern) {
  InitOnce();
  std::vector<char32_t> chars;
  const ptrdiff_t bad = DecodeUtf8(pattern, chars);
  if (bad >= 0) return InvalidArgument("regex pattern is not valid UTF-8");
  const auto* begin = reinterpret_cast<const OnigUChar*>(chars.data());
  const auto* end = begin + chars.size() * sizeof(char32_t);
  regex_t* re = nullptr;
  OnigErrorInfo info;
  const int rc = onig_new(&re, begin, end, ONIG_OPTION_NONE, ONIG_ENCODING_UTF32_LE,
                          ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    return InvalidArgument("regex '" + std::string(pattern) +
                           "' does not compile: " + reinterpret_cast<const char*>(message));
  }
  return static_cast<void*>(re);
}

StatusOr<std::shared_ptr<const Regex>> Regex::Literal(std::string_view literal) {
  // Only Oniguruma's metacharacters are escaped: a backslash before a
  // letter or a digit (or <, >, `, ') could make an escape of its own.
  static constexpr std::string_view kMeta = "\\.+*?()|[]{}^$";
  std::string pattern;
  for (char c : literal) {
    if (kMeta.find(c) != std::string_view::npos) pattern += '\\';
    pattern += c;
  }
  ASSIGN_OR_RETURN(void* compiled, CompileOniguruma(pattern));
  std::shared_ptr<Regex> re(new Regex(compiled, std::string(literal)));
  re->is_literal_ = true;
  DecodeUtf8(literal, re->literal_);
  return std::shared_ptr<const Regex>(std::move(re));
}

Regex::~Regex() { onig_free(static_cast<regex_t*>(re_)); }

void Regex::FindAll(const char32_t* text, size_t n,
                    std::vector<std::pair<size_t, size_t>>& out) const {
  out.clear();
  auto* re = static_cast<regex_t*>(re_);
  const auto* str = reinterpret_cast<const OnigUChar*>(text);
  const auto* str_end = str + n * sizeof(char32_t);
  OnigRegion* region = onig_region_new();
  size_t pos = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= n) {
    const auto* start = str + pos * sizeof(char32_t);
    const int r = onig_search(re, str, str_end, start, str_end, region, ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH or an error: no more matches
    const size_t b = static_cast<size_t>(region->beg[0]) / sizeof(char32_t);
    const size_t e = static_cast<size_t>(region->end[0]) / sizeof(char32_t);
    if (b == e && have_last && last_end == e) {
      // An empty match where the last one ended: step over one char, as the
      // onig crate does, or the search would never advance.
      pos = e + 1;
      continue;
    }
    out.emplace_back(b, e);
    have_last = true;
    last_end = e;
    pos = e == b ? e + 1 : e;
  }
  onig_region_free(region, 1);
}

}  // namespace bertrt::tokenizer

// The bounded encoder's differential check, for the tokenizer fuzz targets:
// a text read in small pieces (every cut a tokenizer allows) under limits
// must give what its whole encoding gives, cut by TruncateEncoding or
// refused; anything else traps.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "bertrt/tokenizer.h"
#include "tokenizer/bounded_encoder.h"

inline void CheckBoundedEncoding(const bertrt::Tokenizer& tok, std::string_view text,
                                 std::optional<std::string_view> pair, size_t max_length,
                                 bertrt::Truncation strategy, bool truncate, bool left,
                                 size_t first_chunk_chars) {
  const auto& enc = dynamic_cast<const bertrt::tokenizer::PieceEncoder&>(tok);
  const auto full = bertrt::tokenizer::EncodeWithin(enc, text, pair, bertrt::EncodeLimits{},
                                                    nullptr, {SIZE_MAX, 1024});
  bertrt::EncodeLimits limits;
  limits.max_length = max_length;
  limits.truncate = truncate;
  limits.truncate_left = left;
  limits.truncation = strategy;
  bertrt::EncodeReport report;
  const auto got =
      bertrt::tokenizer::EncodeWithin(enc, text, pair, limits, &report, {0, first_chunk_chars});
  if (!full.ok()) {
    if (got.ok() || got.status().code() != full.status().code()) __builtin_trap();
    return;
  }
  const bool too_long = !truncate && max_length > 0 && full->input_ids.size() > max_length;
  if (too_long != report.too_long) __builtin_trap();
  if (too_long) {
    if (got.ok() || (report.exact && report.tokens != full->input_ids.size())) __builtin_trap();
    return;
  }
  const auto want =
      truncate ? bertrt::TruncateEncoding(*full, pair.has_value(), max_length, strategy, left)
               : full;
  if (want.ok() != got.ok()) __builtin_trap();
  if (!want.ok()) return;
  if (got->input_ids != want->input_ids || got->token_type_ids != want->token_type_ids ||
      got->offsets != want->offsets || got->special_tokens_mask != want->special_tokens_mask ||
      got->sequence_ids != want->sequence_ids)
    __builtin_trap();
  // Word ids: the same, but where a start cut off was not read (then counted
  // from the first word kept: the same relative to each text's first token).
  if (report.truncated != (want->input_ids.size() < full->input_ids.size())) __builtin_trap();
  if (!left && got->word_ids != want->word_ids) __builtin_trap();
  int32_t first[2][2] = {{-1, -1}, {-1, -1}};  // [got|want][text]
  for (size_t i = 0; i < got->word_ids.size(); ++i) {
    const int8_t s = got->sequence_ids[i];
    if (s < 0) continue;
    if (first[0][s] < 0) first[0][s] = got->word_ids[i], first[1][s] = want->word_ids[i];
    if (got->word_ids[i] - first[0][s] != want->word_ids[i] - first[1][s]) __builtin_trap();
  }
}

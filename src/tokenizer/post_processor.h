// HF's TemplateProcessing (BertProcessing is the same template) and the
// truncation that runs before it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bertrt/status.h"
#include "bertrt/tokenizer.h"
#include "tokenizer/wordpiece.h"

namespace bertrt::tokenizer {

struct TemplateItem {
  int sequence = -1;  // 0: A, 1: B, -1: the special token ids below
  std::vector<int32_t> ids;
  int32_t type_id = 0;
};

struct PostProcessor {
  // Without a post-processor HF adds nothing and gives text_pair type id 1.
  std::vector<TemplateItem> single = {{0, {}, 0}};
  std::vector<TemplateItem> pair = {{0, {}, 0}, {1, {}, 1}};

  size_t AddedTokens(bool is_pair) const;
  // Appends the template applied to a (and b) to `out`.
  void Apply(const TokenList& a, const TokenList* b, Encoding& out) const;
};

// How many tokens of each sequence survive truncation to max_length (which
// counts the special tokens; 0: no truncation).
struct KeptLengths {
  size_t a;
  size_t b;
};
StatusOr<KeptLengths> TruncatedLengths(size_t a, std::optional<size_t> b, size_t special_tokens,
                                       size_t max_length, Truncation strategy);

// What every tokenizer does once its texts are tokenized whole into a (and
// b): cuts them by `limits` (TruncatedLengths, from the start with
// truncate_left) or refuses them (TooManyTokens), then applies `post`.
StatusOr<Encoding> ApplyLimits(const PostProcessor& post, TokenList& a, TokenList* b,
                               const EncodeLimits& limits, EncodeReport* report);

// The refusal of an input of `tokens` tokens (at least, unless `exact`)
// for max_length, told to `report` too.
Status TooManyTokens(EncodeReport* report, size_t tokens, bool exact, size_t max_length);

}  // namespace bertrt::tokenizer

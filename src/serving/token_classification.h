// Token classification (NER) as transformers' TokenClassificationPipeline
// answers it: each token's label scores (softmax of its logits) into
// entities, by token or grouped by one of five aggregation strategies, with
// character offsets into the text; a long text in overlapping windows (a
// stride) whose entities are merged. Knows no device, HTTP or JSON:
// Infer::RunTasks runs windows() on the model and hands the logits back.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/tokenizer.h"

namespace bertrt::serving {

// HF's aggregation_strategy.
enum class Aggregation { kNone, kSimple, kFirst, kAverage, kMax };
// "none" | "simple" | "first" | "average" | "max", in any case.
StatusOr<Aggregation> ParseAggregation(std::string_view name);

struct TokenClassificationOptions {
  Aggregation aggregation = Aggregation::kNone;
  // Labels left out of the answer; nullopt: {"O"}.
  std::optional<std::vector<std::string>> ignore_labels;
  // 0: the text is cut to the model's length; else it is read in windows
  // that overlap by this many tokens (any aggregation but none).
  int stride = 0;
};

struct Entity {
  std::string label;  // "entity" (aggregation none) or "entity_group"
  double score = 0;
  std::string word;             // the tokens decoded
  int index = -1;               // aggregation none: the token's position in the input ids
  uint32_t start = 0, end = 0;  // code points of the text
};

// A label's name by index (ModelConfig::LabelName).
using LabelNames = std::function<std::string(int)>;

class TokenClassification {
 public:
  // Tokenizes `text` for a model taking `max_length` tokens, in at most
  // `max_windows` windows (more: ResourceExhausted; 0: no limit). InvalidArgument for an empty
  // text, a stride with aggregation none, or a stride the windows cannot take.
  static StatusOr<TokenClassification> Prepare(const Tokenizer& tokenizer, std::string text,
                                               int max_length, size_t max_normalized_chars,
                                               size_t max_windows,
                                               TokenClassificationOptions options);
  // What to run: each window's tokens.
  const std::vector<Encoding>& windows() const { return windows_; }
  Aggregation aggregation() const { return options_.aggregation; }
  // logits[w]: window w's [tokens, num_labels] logits, row-major.
  std::vector<Entity> Entities(const std::vector<const float*>& logits, int num_labels,
                               const LabelNames& label) const;

 private:
  TokenClassification(const Tokenizer& tokenizer, std::string text,
                      TokenClassificationOptions options)
      : tokenizer_(&tokenizer), text_(std::move(text)), options_(std::move(options)) {}
  const Tokenizer* tokenizer_;
  std::string text_;
  TokenClassificationOptions options_;
  std::vector<Encoding> windows_;
};

}  // namespace bertrt::serving

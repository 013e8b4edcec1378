// Extractive question answering as transformers' QuestionAnsweringPipeline
// answers it: the question and its context tokenized as a pair, a long
// context in windows that overlap by doc_stride tokens, each window's start
// and end probabilities (context tokens only) scored as spans of at most
// max_answer_len tokens, spans widened to whole words, equal answers (case
// aside) across spans and windows summed, the best top_k returned with
// character offsets into the context; optionally the empty answer ("no
// answer in this text") with its own score. Knows no device, HTTP or JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/tokenizer.h"

namespace bertrt::serving {

struct QuestionAnsweringOptions {
  int top_k = 1;
  int max_answer_len = 15;  // tokens
  // Tokens per window, question and special tokens included; 0: the
  // model's length, at most 384 (the pipeline's default).
  int max_seq_len = 0;
  // Tokens each window shares with the one before; -1: half a window, at most 128.
  int doc_stride = -1;
  bool handle_impossible_answer = false;
  // Widen a span to the words its first and last tokens are in.
  bool align_to_words = true;
};

struct Answer {
  double score = 0;
  uint32_t start = 0, end = 0;  // code points of the context
  std::string answer;
};

class QuestionAnswering {
 public:
  // Tokenizes the pair for a model taking `max_length` tokens, in at most
  // `max_windows` windows (more: ResourceExhausted; 0: no limit). InvalidArgument for an empty
  // text, an option out of range, or a question that leaves a window no room for the context.
  static StatusOr<QuestionAnswering> Prepare(const Tokenizer& tokenizer, std::string_view question,
                                             std::string context, int max_length,
                                             size_t max_normalized_chars, size_t max_windows,
                                             QuestionAnsweringOptions options);
  // What to run: each window's tokens.
  const std::vector<Encoding>& windows() const { return windows_; }
  // start[w], end[w]: window w's start and end logits, one per token. The
  // best answers first, at most top_k.
  std::vector<Answer> Answers(const std::vector<const float*>& start,
                              const std::vector<const float*>& end) const;

 private:
  QuestionAnswering(std::string context, int32_t cls_id, QuestionAnsweringOptions options)
      : context_(std::move(context)), cls_id_(cls_id), options_(options) {}
  std::string context_;
  int32_t cls_id_;
  QuestionAnsweringOptions options_;
  std::vector<Encoding> windows_;
};

}  // namespace bertrt::serving

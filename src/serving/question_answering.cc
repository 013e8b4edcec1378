#include "serving/question_answering.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "serving/text_span.h"

namespace bertrt::serving {

StatusOr<QuestionAnswering> QuestionAnswering::Prepare(
    const Tokenizer& tokenizer, std::string_view question, std::string context, int max_length,
    size_t max_normalized_chars, size_t max_windows, QuestionAnsweringOptions options) {
  RETURN_IF_ERROR(CheckInputText(question));
  RETURN_IF_ERROR(CheckInputText(context));
  if (options.top_k < 1)
    return InvalidArgument("top_k must be at least 1, not " + std::to_string(options.top_k));
  if (options.max_answer_len < 1)
    return InvalidArgument("max_answer_len must be at least 1, not " +
                           std::to_string(options.max_answer_len));
  if (options.max_seq_len < 0 || options.max_seq_len > max_length)
    return InvalidArgument("max_seq_len " + std::to_string(options.max_seq_len) +
                           " is outside 1.." + std::to_string(max_length) +
                           " (the model's length)");
  if (options.max_seq_len == 0) options.max_seq_len = std::min(max_length, 384);
  if (options.doc_stride < 0) options.doc_stride = std::min(options.max_seq_len / 2, 128);
  if (options.doc_stride > options.max_seq_len)
    return InvalidArgument("doc_stride (" + std::to_string(options.doc_stride) +
                           ") is larger than max_seq_len (" + std::to_string(options.max_seq_len) +
                           ")");
  const std::string& cls = tokenizer.settings().cls_token;
  QuestionAnswering task(std::move(context), tokenizer.TokenToId(cls), options);
  EncodeLimits limits;
  limits.max_normalized_chars = max_normalized_chars;
  ASSIGN_OR_RETURN(Encoding full, tokenizer.Encode(question, task.context_, limits));
  ASSIGN_OR_RETURN(task.windows_,
                   OverflowWindows(full, true, static_cast<size_t>(options.max_seq_len),
                                   static_cast<size_t>(options.doc_stride), Truncation::kOnlySecond,
                                   max_windows));
  return task;
}

namespace {

struct Span {
  size_t start, end;  // tokens of the window, inclusive
  float score;
};

// The window's context tokens' [first, last] of the word token `t` is in.
std::pair<size_t, size_t> WordTokens(const Encoding& enc, size_t t) {
  size_t first = t, last = t;
  while (first > 0 && enc.sequence_ids[first - 1] == 1 &&
         enc.word_ids[first - 1] == enc.word_ids[t])
    --first;
  while (last + 1 < enc.input_ids.size() && enc.sequence_ids[last + 1] == 1 &&
         enc.word_ids[last + 1] == enc.word_ids[t])
    ++last;
  return {first, last};
}

}  // namespace

std::vector<Answer> QuestionAnswering::Answers(const std::vector<const float*>& start_logits,
                                               const std::vector<const float*>& end_logits) const {
  const CodePointText context(context_);
  // The pipeline takes twice as many candidates as asked for (and 10 more)
  // when widening spans to words may make several the same.
  const size_t candidates =
      options_.align_to_words ? static_cast<size_t>(options_.top_k) * 2 + 10 : options_.top_k;
  double min_null_score = 1000000;
  std::vector<Answer> answers;
  for (size_t w = 0; w < windows_.size(); ++w) {
    const Encoding& enc = windows_[w];
    const size_t n = enc.input_ids.size();
    // What may be in an answer: the context's tokens, and the leading [CLS]
    // (where models put "no answer"). The pipeline allows every token with
    // [CLS]'s id, also one a question spells out as "[CLS]", whose offsets
    // are the question's: a span from it would cut the context anywhere.
    std::vector<bool> allowed(n);
    for (size_t i = 0; i < n; ++i)
      allowed[i] = enc.sequence_ids[i] == 1 || (i == 0 && enc.input_ids[0] == cls_id_);
    // Softmax over the allowed tokens, in float32 as the pipeline's numpy.
    auto probabilities = [&](const float* logits) {
      std::vector<float> p(n);
      float top = -std::numeric_limits<float>::infinity();
      for (size_t i = 0; i < n; ++i) top = std::max(top, allowed[i] ? logits[i] : -10000.0f);
      float sum = 0;
      for (size_t i = 0; i < n; ++i)
        sum += p[i] = std::exp((allowed[i] ? logits[i] : -10000.0f) - top);
      for (float& v : p) v /= sum;
      return p;
    };
    std::vector<float> start = probabilities(start_logits[w]);
    std::vector<float> end = probabilities(end_logits[w]);
    if (options_.handle_impossible_answer)
      min_null_score = std::min(min_null_score, static_cast<double>(start[0] * end[0]));
    start[0] = end[0] = 0;

    // Every span of allowed tokens up to max_answer_len long, best first
    // (equal scores by position, where numpy's order is arbitrary).
    std::vector<Span> spans;
    for (size_t s = 0; s < n; ++s) {
      if (!allowed[s] || start[s] == 0) continue;
      for (size_t e = s; e < n && e - s < static_cast<size_t>(options_.max_answer_len); ++e) {
        const float score = start[s] * end[e];
        if (allowed[e] && score > 0) spans.push_back({s, e, score});
      }
    }
    const size_t keep = std::min(candidates, spans.size());
    std::partial_sort(spans.begin(), spans.begin() + keep, spans.end(),
                      [](const Span& a, const Span& b) {
                        if (a.score != b.score) return a.score > b.score;
                        return a.start != b.start ? a.start < b.start : a.end < b.end;
                      });
    spans.resize(keep);

    for (const Span& span : spans) {
      uint32_t begin = enc.offsets[span.start].first, stop = enc.offsets[span.end].second;
      if (options_.align_to_words) {
        begin = enc.offsets[WordTokens(enc, span.start).first].first;
        stop = enc.offsets[WordTokens(enc, span.end).second].second;
      }
      const std::string text(context.Slice(begin, stop));
      const std::string lower = Lowercase(text);
      auto same = std::find_if(answers.begin(), answers.end(),
                               [&](const Answer& a) { return Lowercase(a.answer) == lower; });
      if (same != answers.end()) {
        same->score += span.score;
      } else {
        answers.push_back({span.score, begin, stop, text});
      }
    }
  }
  if (options_.handle_impossible_answer) answers.push_back({min_null_score, 0, 0, ""});
  std::stable_sort(answers.begin(), answers.end(),
                   [](const Answer& a, const Answer& b) { return a.score > b.score; });
  if (answers.size() > static_cast<size_t>(options_.top_k)) answers.resize(options_.top_k);
  return answers;
}

}  // namespace bertrt::serving

// The 8-bit accuracy report's comparison (model/quantization_report.h): rows
// as plan verification reads them, question answering per sequence with an
// answer-span entry, retrieval overlap for sequence vectors.
#include "model/quantization_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace bertrt::model {
namespace {

NamedOutput Output(const std::string& name, bool per_token, int width, std::vector<float> data) {
  NamedOutput o;
  o.name = name;
  o.per_token = per_token;
  o.width = width;
  o.data = std::move(data);
  return o;
}

RaggedBatch TwoSequences() {  // 3 and 4 tokens
  RaggedBatch b;
  b.Add({101, 7, 102}, {0, 0, 0});
  b.Add({101, 8, 9, 102}, {0, 0, 0, 0});
  return b;
}

std::vector<OutputDescription> SpanEnds() {
  auto end = [](const char* name) {
    return OutputDescription{.name = name, .per_token = true, .width = 1, .argmax = true};
  };
  return {end("start_logits"), end("end_logits")};
}

// Start and end logits are one value per token: each sequence is a row whose
// argmax is where the span starts (or ends). The second sequence's start
// moves: start agrees on 1 of 2 sequences, end on 2, the span on 1.
TEST(QuantizationReport, QuestionAnsweringComparesSpansPerSequence) {
  const RaggedBatch batch = TwoSequences();
  BatchOutputs fp32, int8;
  fp32.outputs = {Output("start_logits", true, 1, {0, 5, 1, 0, 1, 6, 2}),
                  Output("end_logits", true, 1, {0, 1, 5, 0, 1, 2, 6})};
  int8.outputs = {Output("start_logits", true, 1, {0, 5, 1, 0, 6, 1, 2}),
                  Output("end_logits", true, 1, {0, 1, 5, 0, 1, 2, 6})};
  const std::vector<OutputAccuracy> report = CompareOutputs(SpanEnds(), {batch}, {fp32}, {int8});
  ASSERT_EQ(report.size(), 3u);
  EXPECT_EQ(report[0].output, "start_logits");
  EXPECT_EQ(report[0].rows, 2);
  EXPECT_DOUBLE_EQ(report[0].argmax_agreement, 0.5);
  EXPECT_EQ(report[1].output, "end_logits");
  EXPECT_DOUBLE_EQ(report[1].argmax_agreement, 1.0);
  EXPECT_DOUBLE_EQ(report[1].cosine_min, 1.0);
  EXPECT_EQ(report[2].output, "answer span");
  EXPECT_EQ(report[2].rows, 2);
  EXPECT_DOUBLE_EQ(report[2].argmax_agreement, 0.5);
  EXPECT_LT(report[2].cosine_min, 1.0);  // its ends' worst
  EXPECT_DOUBLE_EQ(report[2].max_abs_error, 5.0);
}

// Token classification: a row per token; sequence vectors: a row per
// sequence, with the retrieval overlap.
TEST(QuantizationReport, TokenRowsAndSequenceVectors) {
  const RaggedBatch batch = TwoSequences();
  const OutputDescription tokens{.name = "logits", .per_token = true, .width = 2, .argmax = true};
  BatchOutputs fp32, int8;
  std::vector<float> logits(14, 0.0f), moved;
  for (int t = 0; t < 7; ++t) logits[2 * t] = 1.0f;  // every token: class 0
  moved = logits;
  moved[2 * 6 + 1] = 2.0f;  // the last token: class 1
  fp32.outputs = {Output("logits", true, 2, logits)};
  int8.outputs = {Output("logits", true, 2, moved)};
  std::vector<OutputAccuracy> report = CompareOutputs({tokens}, {batch}, {fp32}, {int8});
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].rows, 7);
  EXPECT_DOUBLE_EQ(report[0].argmax_agreement, 6.0 / 7.0);
  EXPECT_DOUBLE_EQ(report[0].top10_overlap, -1.0);

  const OutputDescription vectors{.name = "embedding", .width = 2, .sequence_vector = true};
  fp32.outputs = {Output("embedding", false, 2, {1, 0, 0, 1})};
  int8.outputs = {Output("embedding", false, 2, {1, 0.1f, 0.1f, 1})};
  report = CompareOutputs({vectors}, {batch}, {fp32}, {int8});
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].rows, 2);
  EXPECT_LT(report[0].cosine_min, 1.0);
  EXPECT_GT(report[0].cosine_min, 0.99);
  EXPECT_DOUBLE_EQ(report[0].argmax_agreement, -1.0);
  EXPECT_DOUBLE_EQ(report[0].top10_overlap, 1.0);
}

// The cosine mean's standard error (the budget's margin reads it): the
// rows' sample standard deviation over the square root of their number; 0
// where the rows agree.
TEST(QuantizationReport, CosineMeanStandardError) {
  RaggedBatch batch = TwoSequences();
  batch.Add({101, 9, 102}, {0, 0, 0});
  const OutputDescription vectors{.name = "embedding", .width = 2, .sequence_vector = true};
  BatchOutputs fp32, int8;
  fp32.outputs = {Output("embedding", false, 2, {1, 0, 1, 0, 1, 0})};
  int8.outputs = {Output("embedding", false, 2, {1, 0, 3, 4, 0, 1})};  // cosines 1, 0.6, 0
  std::vector<OutputAccuracy> report = CompareOutputs({vectors}, {batch}, {fp32}, {int8});
  ASSERT_EQ(report.size(), 1u);
  EXPECT_NEAR(report[0].cosine_mean, 1.6 / 3, 1e-12);
  const double mean = 1.6 / 3;
  const double variance =
      ((1 - mean) * (1 - mean) + (0.6 - mean) * (0.6 - mean) + mean * mean) / 2;
  EXPECT_NEAR(report[0].cosine_mean_stderr, std::sqrt(variance / 3), 1e-7);
  report = CompareOutputs({vectors}, {batch}, {fp32}, {fp32});
  EXPECT_NEAR(report[0].cosine_mean_stderr, 0.0, 1e-7);
}

}  // namespace
}  // namespace bertrt::model

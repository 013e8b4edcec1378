// The one description of what each head returns (DescribeOutputs), and the
// assembly of a run's outputs from a head's arrays by it. Every name, width
// and layout here is what clients see (KServe metadata, JSON keys, TEI), so
// each head's table is spelled out in full.
#include "bertrt/head_outputs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/outputs.h"

namespace bertrt {
namespace {

constexpr int kHidden = 16;

ModelConfig Config(HeadKind head) {
  ModelConfig c;
  c.hidden_size = kHidden;
  c.head = head;
  c.num_labels = head == HeadKind::kQuestionAnswering ? 2 : 3;
  return c;
}

// Field by field, each output named: what a client sees of it (name, layout)
// and what the engines and front ends read.
void ExpectOutputs(const std::vector<OutputDescription>& got,
                   const std::vector<OutputDescription>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].per_token, want[i].per_token);
    EXPECT_EQ(got[i].width, want[i].width);
    EXPECT_EQ(got[i].array, want[i].array);
    EXPECT_EQ(got[i].array_width, want[i].array_width);
    EXPECT_EQ(got[i].first_column, want[i].first_column);
    EXPECT_EQ(got[i].on_request, want[i].on_request);
    EXPECT_EQ(got[i].first_tokens_only, want[i].first_tokens_only);
    EXPECT_EQ(got[i].argmax, want[i].argmax);
    EXPECT_EQ(got[i].scores_labels, want[i].scores_labels);
    EXPECT_EQ(got[i].sequence_vector, want[i].sequence_vector);
  }
}

// Every model ends with its hidden states, returned on request.
const OutputDescription kHiddenState{.name = "last_hidden_state",
                                     .per_token = true,
                                     .width = kHidden,
                                     .array = HeadArray::kHiddenState,
                                     .array_width = kHidden,
                                     .on_request = true};

TEST(HeadOutputs, BaseWithPooler) {
  ExpectOutputs(DescribeOutputs(Config(HeadKind::kBase), true), {{.name = "pooler_output",
                                                                  .per_token = false,
                                                                  .width = kHidden,
                                                                  .array = HeadArray::kPooler,
                                                                  .array_width = kHidden,
                                                                  .first_tokens_only = true,
                                                                  .sequence_vector = true},
                                                                 kHiddenState});
}

TEST(HeadOutputs, BaseWithoutPoolerHasOnlyTheHiddenStates) {
  ExpectOutputs(DescribeOutputs(Config(HeadKind::kBase), false), {kHiddenState});
}

TEST(HeadOutputs, SequenceClassification) {
  ExpectOutputs(DescribeOutputs(Config(HeadKind::kSequenceClassification), true),
                {{.name = "logits",
                  .per_token = false,
                  .width = 3,
                  .array = HeadArray::kClassifier,
                  .array_width = 3,
                  .first_tokens_only = true,
                  .argmax = true,
                  .scores_labels = true},
                 kHiddenState});
}

TEST(HeadOutputs, TokenClassification) {
  ExpectOutputs(DescribeOutputs(Config(HeadKind::kTokenClassification), false),
                {{.name = "logits",
                  .per_token = true,
                  .width = 3,
                  .array = HeadArray::kClassifier,
                  .array_width = 3,
                  .argmax = true,
                  .scores_labels = true},
                 kHiddenState});
}

TEST(HeadOutputs, QuestionAnsweringSplitsOneArrayInTwo) {
  ExpectOutputs(DescribeOutputs(Config(HeadKind::kQuestionAnswering), false),
                {{.name = "start_logits",
                  .per_token = true,
                  .width = 1,
                  .array = HeadArray::kClassifier,
                  .array_width = 2,
                  .first_column = 0,
                  .argmax = true},
                 {.name = "end_logits",
                  .per_token = true,
                  .width = 1,
                  .array = HeadArray::kClassifier,
                  .array_width = 2,
                  .first_column = 1,
                  .argmax = true},
                 kHiddenState});
}

TEST(HeadOutputs, SentenceEmbedding) {
  ModelConfig c = Config(HeadKind::kSentenceEmbedding);
  c.pooling_modes = {Pooling::kMean, Pooling::kMax};  // 32 wide
  ExpectOutputs(DescribeOutputs(c, false), {{.name = "embedding",
                                             .per_token = false,
                                             .width = 2 * kHidden,
                                             .array = HeadArray::kSentenceEmbedding,
                                             .array_width = 2 * kHidden,
                                             .sequence_vector = true},
                                            kHiddenState});
  // Dense modules set the array's width; truncate_dim keeps its first columns.
  c.dense = {{2 * kHidden, 24, true, DenseActivation::kTanh}};
  c.truncate_dim = 8;
  ExpectOutputs(DescribeOutputs(c, false), {{.name = "embedding",
                                             .per_token = false,
                                             .width = 8,
                                             .array = HeadArray::kSentenceEmbedding,
                                             .array_width = 24,
                                             .sequence_vector = true},
                                            kHiddenState});
}

TEST(HeadOutputs, ClsPoolingReadsFirstTokensUnlessAPromptIsLeftOut) {
  ModelConfig c = Config(HeadKind::kSentenceEmbedding);
  c.pooling_modes = {Pooling::kCls};
  EXPECT_TRUE(DescribeOutputs(c, false)[0].first_tokens_only);
  c.include_prompt = false;
  EXPECT_FALSE(DescribeOutputs(c, false)[0].first_tokens_only);
}

TEST(HeadOutputs, ReadOnlyFirstTokensWithoutTheHiddenStatesAndWithSomethingReturned) {
  const auto pooled = DescribeOutputs(Config(HeadKind::kSequenceClassification), true);
  EXPECT_TRUE(OutputsReadOnlyFirstTokens(pooled, false));
  EXPECT_FALSE(OutputsReadOnlyFirstTokens(pooled, true));
  EXPECT_FALSE(OutputsReadOnlyFirstTokens(
      DescribeOutputs(Config(HeadKind::kTokenClassification), false), false));
  EXPECT_FALSE(OutputsReadOnlyFirstTokens(DescribeOutputs(Config(HeadKind::kBase), false), false));
}

TEST(HeadOutputs, FindsByName) {
  const auto outputs = DescribeOutputs(Config(HeadKind::kQuestionAnswering), false);
  ASSERT_NE(FindOutput(outputs, "end_logits"), nullptr);
  EXPECT_EQ(FindOutput(outputs, "end_logits")->first_column, 1);
  EXPECT_EQ(FindOutput(outputs, "logits"), nullptr);
}

// Question answering: both logits of each token in one array, split into two
// outputs; the hidden states only when asked for.
TEST(AssembleOutputs, SplitsColumnsAndLeavesOnRequestOutputsOut) {
  const auto outputs = DescribeOutputs(Config(HeadKind::kQuestionAnswering), false);
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6};  // 3 tokens x (start, end)
  const std::vector<float> hidden(3 * kHidden, 0.5f);
  HostArrays arrays;
  arrays[HeadArray::kClassifier] = {logits.data(), 2};
  arrays[HeadArray::kHiddenState] = {hidden.data(), kHidden};
  auto got = AssembleOutputs(outputs, false, arrays, 3, 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->outputs.size(), 2u);
  EXPECT_EQ(got->outputs[0].name, "start_logits");
  EXPECT_EQ(got->outputs[0].data, (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(got->outputs[1].name, "end_logits");
  EXPECT_EQ(got->outputs[1].data, (std::vector<float>{2, 4, 6}));
  got = AssembleOutputs(outputs, true, arrays, 3, 2);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->outputs.size(), 3u);
  EXPECT_EQ(got->outputs[2].name, "last_hidden_state");
  EXPECT_TRUE(got->outputs[2].per_token);
  EXPECT_EQ(got->outputs[2].data, hidden);
}

// truncate_dim: the first columns of each row, from a full array (the CPU
// engine's) or from only the columns read (the CUDA engine's copy).
TEST(AssembleOutputs, KeepsTheFirstColumnsOfTruncatedEmbeddings) {
  ModelConfig c = Config(HeadKind::kSentenceEmbedding);
  c.truncate_dim = 2;
  c.hidden_size = 3;
  const auto outputs = DescribeOutputs(c, false);
  const std::vector<float> full = {1, 2, 3, 4, 5, 6};  // 2 sequences x 3
  HostArrays arrays;
  arrays[HeadArray::kSentenceEmbedding] = {full.data(), 3};
  auto got = AssembleOutputs(outputs, false, arrays, 5, 2);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->outputs[0].width, 2);
  EXPECT_EQ(got->outputs[0].data, (std::vector<float>{1, 2, 4, 5}));
  const std::vector<float> read = {1, 2, 4, 5};
  arrays[HeadArray::kSentenceEmbedding] = {read.data(), 2};
  got = AssembleOutputs(outputs, false, arrays, 5, 2);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->outputs[0].data, read);
}

TEST(AssembleOutputs, AnArrayNotComputedIsAnError) {
  auto got =
      AssembleOutputs(DescribeOutputs(Config(HeadKind::kBase), true), false, HostArrays{}, 1, 1);
  EXPECT_EQ(got.status().code(), StatusCode::kInternal);
}

// What a backend computing in device memory copies back: each array once,
// only the columns read.
TEST(ArraySpans, OneCopyPerArrayOfTheColumnsRead) {
  const auto qa = ArraySpans(DescribeOutputs(Config(HeadKind::kQuestionAnswering), false), true);
  ASSERT_EQ(qa.size(), 2u);
  EXPECT_EQ(qa[0].array, HeadArray::kClassifier);
  EXPECT_TRUE(qa[0].per_token);
  EXPECT_EQ(qa[0].array_width, 2);
  EXPECT_EQ(qa[0].begin, 0);
  EXPECT_EQ(qa[0].end, 2);
  EXPECT_EQ(qa[1].array, HeadArray::kHiddenState);
  EXPECT_EQ(qa[1].end, kHidden);

  ModelConfig c = Config(HeadKind::kSentenceEmbedding);
  c.truncate_dim = 4;
  const auto emb = ArraySpans(DescribeOutputs(c, false), false);
  ASSERT_EQ(emb.size(), 1u);
  EXPECT_FALSE(emb[0].per_token);
  EXPECT_EQ(emb[0].array_width, kHidden);
  EXPECT_EQ(emb[0].end, 4);
}

}  // namespace
}  // namespace bertrt

// Input and output blocks of a config.pbtxt checked against the model: what
// agrees loads, what does not is an error naming the file, block and field.
#include "server/common/triton_config.h"

#include <gtest/gtest.h>

namespace bertrt::server {
namespace {

// A sentence-embedding model of width 32 (and its per-token states), 64 tokens.
const std::vector<OutputDescription> kOutputs = {
    {.name = "embedding", .per_token = false, .width = 32},
    {.name = "last_hidden_state", .per_token = true, .width = 32}};

Status Check(const std::string& text) {
  auto c = ParseModelConfig(text, "repo/m/config.pbtxt", "m");
  if (!c.ok()) return c.status();
  return CheckTensorBlocks(*c, 64, kOutputs);
}

void ExpectOk(const std::string& text) {
  Status st = Check(text);
  EXPECT_TRUE(st.ok()) << text << "\n" << st.message();
}

void ExpectError(const std::string& text, const std::vector<std::string>& fragments) {
  Status st = Check(text);
  ASSERT_FALSE(st.ok()) << text;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  for (const std::string& f : {std::string("repo/m/config.pbtxt")})
    EXPECT_NE(st.message().find(f), std::string::npos) << st.message();
  for (const std::string& f : fragments)
    EXPECT_NE(st.message().find(f), std::string::npos) << "'" << f << "' in " << st.message();
}

TEST(TritonConfig, BlocksThatDescribeTheModelPass) {
  // Triton's convention: with max_batch_size the batch dimension is left out.
  ExpectOk(R"(max_batch_size: 8
              input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] },
                      { name: "attention_mask" data_type: TYPE_INT64 dims: [ 64 ] } ]
              output [ { name: "embedding" data_type: TYPE_FP32 dims: [ 32 ] },
                       { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, 32 ] } ])");
  // Without it, dims hold the batch dimension.
  ExpectOk(R"(input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1, -1 ] } ]
              output [ { name: "embedding" data_type: TYPE_FP32 dims: [ -1, 32 ] } ])");
  ExpectOk(R"(max_batch_size: 4
              input [ { name: "text" data_type: TYPE_STRING dims: [ 1 ] } ])");
  ExpectOk(R"(input [ { name: "text" data_type: TYPE_STRING dims: [ -1 ] },
                      { name: "text_pair" data_type: TYPE_STRING dims: [ -1, 1 ] } ])");
  ExpectOk("");
}

TEST(TritonConfig, DisagreementsNameTheBlockAndTheField) {
  ExpectError(R"(max_batch_size: 8
                 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ])",
              {"input \"INPUT0\"", "no such input", "input_ids"});
  ExpectError(R"(max_batch_size: 8
                 input [ { name: "input_ids" data_type: TYPE_FP32 dims: [ -1 ] } ])",
              {"input \"input_ids\"", "data_type TYPE_FP32", "TYPE_INT32 or TYPE_INT64"});
  ExpectError(
      R"(max_batch_size: 8
                 input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1, -1 ] } ])",
      {"input \"input_ids\" dims [-1, -1]", "batch dimension is left out", "write dims: [ -1 ]"});
  ExpectError(R"(max_batch_size: 8
                 input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ 128 ] } ])",
              {"dims [128]", "at most 64"});
  ExpectError(R"(input [ { name: "text" data_type: TYPE_STRING dims: [ -1, 16 ] } ])",
              {"input \"text\" dims [-1, 16]", "[-1] or [-1, 1]"});
  ExpectError(R"(input [ { name: "text" data_type: TYPE_INT64 dims: [ -1 ] } ])",
              {"input \"text\"", "TYPE_STRING"});
  ExpectError(R"(max_batch_size: 8
                 output [ { name: "embedding" data_type: TYPE_FP32 dims: [ 768 ] } ])",
              {"output \"embedding\" dims [768]", "[-1, 32]", "write dims: [ 32 ]"});
  ExpectError(R"(output [ { name: "sentence_embedding" data_type: TYPE_FP32 dims: [ -1, 32 ] } ])",
              {"output \"sentence_embedding\"", "no such output", "embedding, last_hidden_state"});
  ExpectError(R"(output [ { name: "embedding" data_type: TYPE_FP16 dims: [ -1, 32 ] } ])",
              {"output \"embedding\"", "TYPE_FP16", "TYPE_FP32"});
  ExpectError(R"(max_batch_size: 2
                 output [ { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ 32 ] } ])",
              {"output \"last_hidden_state\" dims [32]", "[-1, -1, 32]"});
  ExpectError(R"(input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1, 0 ] } ])",
              {"0 is no size"});
  ExpectError(R"(input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1, -1 ] },
                         { name: "input_ids" data_type: TYPE_INT64 dims: [ -1, -1 ] } ])",
              {"declared twice"});
}

}  // namespace
}  // namespace bertrt::server

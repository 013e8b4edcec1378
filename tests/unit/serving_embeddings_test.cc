// serving::EmbeddingRequest: which vectors are normalized (once), cut, or refused, and
// which runs leave the model's Normalize out.
#include <gtest/gtest.h>

#include <cmath>

#include "serving/embeddings.h"

namespace bertrt::serving {
namespace {

InferResult OneRow(const std::string& name, std::vector<float> row) {
  InferResult r;
  NamedOutput o;
  o.name = name;
  o.width = static_cast<int>(row.size());
  o.data = std::move(row);
  r.outputs.outputs.push_back(std::move(o));
  r.cu_seqlens = {0, 3};
  return r;
}

double Norm(const std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += double(x) * x;
  return std::sqrt(n);
}

TEST(ServingEmbeddings, NormalizedOnceCutThenNormalizedAgain) {
  ModelConfig c;
  c.head = HeadKind::kSentenceEmbedding;
  c.normalize = true;
  OutputDescription out{.name = "embedding", .width = 4, .array_width = 4, .sequence_vector = true};
  // The model's Normalize made it (nearly) a unit vector: left as the engine gave it.
  const std::vector<float> engine = {0.5f, 0.5f, 0.5f, 0.5001f};
  auto whole = EmbeddingRequest::Make(c, out, {true, std::nullopt});
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(whole->run_options().normalize);
  auto rows = whole->Rows(OneRow("embedding", engine));
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0], engine);
  // Cut to 2 values: a unit vector again.
  auto cut = EmbeddingRequest::Make(c, out, {true, 2});
  ASSERT_TRUE(cut.ok());
  rows = cut->Rows(OneRow("embedding", engine));
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ((*rows)[0].size(), 2u);
  EXPECT_NEAR(Norm((*rows)[0]), 1.0, 1e-6);
  // The model's truncate_dim cut it after its Normalize: normalized here.
  OutputDescription truncated = out;
  truncated.array_width = 8;
  auto t = EmbeddingRequest::Make(c, truncated, {true, std::nullopt});
  ASSERT_TRUE(t.ok());
  rows = t->Rows(OneRow("embedding", {3, 4, 0, 0}));
  ASSERT_TRUE(rows.ok());
  EXPECT_NEAR((*rows)[0][0], 0.6, 1e-6);
  // A model without Normalize: normalized when asked, as it is when not.
  c.normalize = false;
  auto plain = EmbeddingRequest::Make(c, out, {true, std::nullopt});
  rows = plain->Rows(OneRow("embedding", {3, 4, 0, 0}));
  EXPECT_NEAR((*rows)[0][1], 0.8, 1e-6);
  auto raw = EmbeddingRequest::Make(c, out, {false, std::nullopt});
  // Nothing for the engine to leave out: the run is the usual one (one batch with the rest).
  EXPECT_TRUE(raw->run_options().normalize);
  rows = raw->Rows(OneRow("embedding", {3, 4, 0, 0}));
  EXPECT_EQ((*rows)[0], (std::vector<float>{3, 4, 0, 0}));
}

TEST(ServingEmbeddings, BeforeTheModelsNormalizeTheEngineLeavesItOut) {
  ModelConfig c;
  c.head = HeadKind::kSentenceEmbedding;
  c.normalize = true;
  OutputDescription out{.name = "embedding", .width = 4, .array_width = 4, .sequence_vector = true};
  auto before = EmbeddingRequest::Make(c, out, {false, std::nullopt});
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->run_options().normalize);
  EXPECT_FALSE(before->run_options().last_hidden_state);
  // What the engine gave without the module is the answer, cut or whole, never normalized.
  auto rows = before->Rows(OneRow("embedding", {3, 4, 0, 0}));
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0], (std::vector<float>{3, 4, 0, 0}));
  auto cut = EmbeddingRequest::Make(c, out, {false, 2});
  rows = cut->Rows(OneRow("embedding", {3, 4, 0, 0}));
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0], (std::vector<float>{3, 4}));
}

TEST(ServingEmbeddings, RefusesWhatTheModelCannotGive) {
  ModelConfig c;
  c.head = HeadKind::kSparseEmbedding;
  OutputDescription sparse{.name = "sparse_embedding",
                           .width = 8,
                           .array_width = 8,
                           .sequence_vector = true,
                           .sparse = true};
  EXPECT_EQ(EmbeddingRequest::Make(c, sparse, {true, std::nullopt}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(EmbeddingRequest::Make(c, sparse, {false, std::nullopt}).ok());
  EXPECT_EQ(EmbeddingRequest::Make(c, sparse, {false, 9}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bertrt::serving

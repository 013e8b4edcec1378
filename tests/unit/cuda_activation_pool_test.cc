// The CUDA engine's activation pool: SPLADE's pooled vocabulary vectors are
// sized by the batch's sequences, not its tokens (a row is a whole
// vocabulary: sized by tokens, 16,384 tokens of BERT's 30,522 entries took
// 2 GB of device memory and 2 GB pinned), and grow with the sequences.
#if BERTRT_HAVE_CUDA
#include "backends/cuda/engine/activation_pool.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "cuda_test_util.h"

namespace bertrt::cuda {
namespace {

class CudaActivationPoolTest : public test_util::GpuTest {};

ModelConfig BertBase(HeadKind head) {
  ModelConfig c;
  c.vocab_size = 30522;
  c.hidden_size = 768;
  c.num_layers = 12;
  c.num_heads = 12;
  c.intermediate_size = 3072;
  c.head = head;
  return c;
}

TEST_F(CudaActivationPoolTest, SparseVectorsFollowTheSequencesNotTheTokens) {
  const ModelConfig splade = BertBase(HeadKind::kSparseEmbedding);
  const ModelConfig base = BertBase(HeadKind::kBase);
  constexpr size_t kFp16 = 2, kVocabRow = 30522 * 4;
  ActivationPool sparse_pool(splade, kFp16, 1), base_pool(base, kFp16, 1);
  ASSERT_TRUE(sparse_pool.Reserve(16384, 8, "").ok());
  ASSERT_TRUE(base_pool.Reserve(16384, 8, "").ok());
  // SPLADE's extra: one chunk of masked-LM logits and 64 pooled rows (the
  // sequences, rounded up), plus alignment; not 16,384 rows.
  const size_t extra = kMaskedLmChunkTokens * 30522 * kFp16 + 64 * kVocabRow + 4096;
  EXPECT_LE(sparse_pool.bytes(), base_pool.bytes() + extra);
  EXPECT_LT(sparse_pool.bytes(), size_t{1} << 30);
  EXPECT_TRUE(sparse_pool.Fits(16384, 64));
  EXPECT_FALSE(sparse_pool.Fits(16384, 65));
  EXPECT_FALSE(sparse_pool.Fits(16385, 1));
  // Without a sparse head the sequences ask nothing of the pool.
  EXPECT_TRUE(base_pool.Fits(16384, 16384));

  // More sequences grow it (and move it: generation counts up), keeping its
  // tokens; the new rows are there to be written.
  const uint64_t generation = sparse_pool.generation();
  ASSERT_TRUE(sparse_pool.Reserve(1000, 100, "").ok());
  EXPECT_GT(sparse_pool.generation(), generation);
  EXPECT_EQ(sparse_pool.capacity_tokens(), 16384);
  EXPECT_TRUE(sparse_pool.Fits(16384, 128));
  EXPECT_FALSE(sparse_pool.Fits(16384, 129));
  EXPECT_EQ(cudaMemset(sparse_pool.workspace().sparse_f32, 0, 128 * kVocabRow), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  // A batch's sequences never outnumber its tokens: the rows stop there.
  ActivationPool small(splade, kFp16, 1);
  ASSERT_TRUE(small.Reserve(100, 100, "").ok());
  EXPECT_EQ(small.capacity_tokens(), 256);
  EXPECT_TRUE(small.Fits(256, 128));
  EXPECT_FALSE(small.Fits(256, 129));
  // ... and a fitting batch asks for nothing.
  const uint64_t before = small.generation();
  ASSERT_TRUE(small.Reserve(200, 20, "").ok());
  EXPECT_EQ(small.generation(), before);
}

}  // namespace
}  // namespace bertrt::cuda
#endif  // BERTRT_HAVE_CUDA

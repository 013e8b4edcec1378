// The CUDA engine's buckets and dummy sequences (plain arithmetic: no GPU).
#if defined(BERTRT_HAVE_CUDA)
#include "backends/cuda/batch_shape.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace bertrt::cuda {
namespace {

// Every property the kernels rely on, for a batch of the given lengths.
void CheckBatch(const std::vector<int>& lengths) {
  const int n = static_cast<int>(lengths.size());
  std::vector<int32_t> real_cu(n + 1, 0);
  for (int s = 0; s < n; ++s) real_cu[s + 1] = real_cu[s] + lengths[s];
  const int t = real_cu[n];
  const int max_len = *std::max_element(lengths.begin(), lengths.end());
  const Shape shape = PaddedShape(t, n, max_len, false);
  const std::string what = std::to_string(n) + " sequences, " + std::to_string(t) + " tokens";
  ASSERT_GE(shape.tokens, t) << what;
  ASSERT_GE(shape.seqs, n) << what;
  EXPECT_EQ(TokenBucket(shape.tokens), shape.tokens) << what;
  EXPECT_EQ(SeqBucket(shape.seqs), shape.seqs) << what;
  EXPECT_GE(shape.max_len, max_len) << what;
  EXPECT_EQ(shape.max_len % kLenBucket, 0) << what;
  // The batch's ints fit the pool's int region sized for its tokens.
  EXPECT_LE(shape.seqs, shape.tokens) << what;
  EXPECT_LE(IntCount(shape), IntCapacity(shape.tokens)) << what;
  // Padding needs a dummy to hold it; dummies need a token among them.
  EXPECT_EQ(shape.tokens > t, shape.seqs > n) << what;
  // No more padding than the token bucket's own rounding of t + 1.
  EXPECT_LE(shape.tokens, TokenBucket(t + 1)) << what;

  std::vector<int32_t> ints(IntCapacity(shape.tokens), -1);
  const BatchInts b = LayOutInts(ints.data(), shape);
  std::copy(real_cu.begin(), real_cu.end(), b.cu);
  LayOutDummies(shape, n, b.cu);
  EXPECT_EQ(b.cu[shape.seqs], shape.tokens) << what;
  for (int s = 0; s < shape.seqs; ++s) {
    const int len = b.cu[s + 1] - b.cu[s];
    ASSERT_GE(len, 0) << what << ", sequence " << s;
    // Every sequence starts at a row of the batch (a first-token read stays in it).
    EXPECT_LT(b.cu[s], shape.tokens) << what << ", sequence " << s;
    if (s >= n) EXPECT_LE(len, kLenBucket) << what << ", dummy " << s;
    if (s < n) EXPECT_EQ(len, lengths[s]) << what << ", sequence " << s;
  }

  LongestFirst(b.cu, shape.seqs, b.by_length);
  // Every sequence's (first token, length) once, longest first, ties in index order.
  std::vector<std::pair<int32_t, int32_t>> seen, all;
  for (int i = 0; i < shape.seqs; ++i) {
    seen.emplace_back(b.by_length[2 * i], b.by_length[2 * i + 1]);
    all.emplace_back(b.cu[i], b.cu[i + 1] - b.cu[i]);
  }
  for (int i = 1; i < shape.seqs; ++i) {
    const auto [prev_begin, prev_len] = seen[i - 1];
    const auto [begin, len] = seen[i];
    EXPECT_TRUE(prev_len > len || (prev_len == len && prev_begin <= begin))
        << what << ": position " << i;
  }
  std::sort(seen.begin(), seen.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(seen, all) << what << ": not every sequence once";
  // by_length ends the batch's ints.
  EXPECT_EQ(b.by_length + 2 * shape.seqs - ints.data(),
            static_cast<std::ptrdiff_t>(IntCount(shape)));
}

TEST(BatchShapeTest, BatchesOnBothBucketsRunAsTheyAre) {
  EXPECT_EQ(PaddedShape(128, 1, 128, false), (Shape{128, 1, 128, false}));
  EXPECT_EQ(PaddedShape(4096, 32, 128, true), (Shape{4096, 32, 128, true}));
  EXPECT_EQ(PaddedShape(16384, 128, 128, false), (Shape{16384, 128, 128, false}));
}

// 32 sequences of 16..128 tokens, 2,426 in all: 6 tokens of padding carry 8
// dummies, 7 of them empty (every dummy took a token before, and the batch ran
// as 2,560 tokens).
TEST(BatchShapeTest, EmptyDummiesKeepTheSmallestTokenBucket) {
  EXPECT_EQ(PaddedShape(2426, 32, 127, false), (Shape{2432, 40, 128, false}));
  std::vector<int32_t> cu(41 + 40, 0);
  cu[32] = 2426;
  LayOutDummies({2432, 40, 128, false}, 32, cu.data());
  EXPECT_EQ(std::vector<int32_t>(cu.begin() + 32, cu.begin() + 41),
            (std::vector<int32_t>{2426, 2426, 2426, 2426, 2426, 2426, 2426, 2426, 2432}));
}

TEST(BatchShapeTest, TokenBucketsStepByASixteenthOfTheirPowerOfTwo) {
  EXPECT_EQ(TokenBucket(1), 64);
  EXPECT_EQ(TokenBucket(2048), 2048);
  EXPECT_EQ(TokenBucket(2049), 2176);
  EXPECT_EQ(TokenBucket(4097), 4352);
  EXPECT_EQ(SeqBucket(1), 1);
  EXPECT_EQ(SeqBucket(3), 4);
  EXPECT_EQ(SeqBucket(9), 16);
  EXPECT_EQ(SeqBucket(33), 40);
}

TEST(BatchShapeTest, EveryBatchKeepsTheKernelsInvariants) {
  // Exhaustive over small batches of short sequences...
  for (int n = 1; n <= 12; ++n)
    for (int len = 1; len <= 70; ++len) {
      ASSERT_NO_FATAL_FAILURE(CheckBatch(std::vector<int>(n, len)));
    }
  // ... batches that land exactly on a token bucket but not a sequence one ...
  ASSERT_NO_FATAL_FAILURE(CheckBatch({64, 64, 64}));
  ASSERT_NO_FATAL_FAILURE(CheckBatch(std::vector<int>(64, 1)));
  ASSERT_NO_FATAL_FAILURE(CheckBatch(std::vector<int>(63, 1)));
  ASSERT_NO_FATAL_FAILURE(CheckBatch(std::vector<int>(41, 500)));
  // ... and random ragged ones up to 512 tokens per sequence.
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::vector<int> lengths(std::uniform_int_distribution<int>(1, 200)(rng));
    const int longest = std::uniform_int_distribution<int>(1, 512)(rng);
    for (int& l : lengths) l = std::uniform_int_distribution<int>(1, longest)(rng);
    ASSERT_NO_FATAL_FAILURE(CheckBatch(lengths));
  }
}

}  // namespace
}  // namespace bertrt::cuda
#endif  // BERTRT_HAVE_CUDA

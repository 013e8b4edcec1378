// The CUDA engine's buckets and dummy sequences (plain arithmetic: no GPU).
#if defined(BERTRT_HAVE_CUDA)
#include "backends/cuda/engine/batch_shape.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace bertrt::cuda {
namespace {

// A batch of sequences of at most kAttentionWindow tokens, laid out in
// windows as the engine lays it out: what the TMA attention kernel relies on.
void CheckWindows(const std::vector<int>& lengths, const Shape& shape, const std::string& what) {
  const int n = static_cast<int>(lengths.size());
  const WindowPacking packing = PackWindows(lengths);
  std::vector<int> sorted_order = packing.order;
  std::sort(sorted_order.begin(), sorted_order.end());
  for (int i = 0; i < n; ++i) ASSERT_EQ(sorted_order[i], i) << what << ": not every sequence once";
  int total = 0, k = 0;
  for (int count : packing.window_seqs) {
    ASSERT_GE(count, 1) << what;
    int window = 0;
    for (int i = 0; i < count; ++i) window += lengths[packing.order[k++]];
    EXPECT_LE(window, kAttentionWindow) << what;
    total += window;
  }
  ASSERT_EQ(k, n) << what;
  // No more windows than twice the fewest possible (best fit, longest
  // first, leaves at most one window less than half full).
  const int fewest = (total + kAttentionWindow - 1) / kAttentionWindow;
  EXPECT_LE(static_cast<int>(packing.window_seqs.size()), std::max(1, 2 * fewest)) << what;

  std::vector<int32_t> ints(IntCapacity(shape.tokens), -1);
  const BatchInts b = LayOutInts(ints.data(), shape);
  b.cu[0] = 0;
  for (int i = 0; i < n; ++i) b.cu[i + 1] = b.cu[i] + lengths[packing.order[i]];
  LayOutDummies(shape, n, b.cu);
  LayOutWindows(b.cu, shape.seqs, packing.window_seqs, b.by_length, b.row_bounds);
  // The windows tile the batch's rows, longest first, then (0, 0) entries.
  struct Window {
    int32_t begin, len;
    bool mixed;
    bool operator<(const Window& o) const { return begin < o.begin; }
  };
  std::vector<Window> windows;
  int entries = 0;
  for (; entries < shape.seqs && b.by_length[2 * entries + 1] > 0; ++entries) {
    const int32_t len = b.by_length[2 * entries + 1];
    windows.push_back({b.by_length[2 * entries], len & ~kMixedWindow, (len & kMixedWindow) != 0});
    EXPECT_LE(windows.back().len, kAttentionWindow) << what;
    if (entries > 0) EXPECT_LE(windows.back().len, windows[entries - 1].len) << what;
  }
  for (int i = entries; i < shape.seqs; ++i) {
    EXPECT_EQ(b.by_length[2 * i], 0) << what << ", entry " << i;
    EXPECT_EQ(b.by_length[2 * i + 1], 0) << what << ", entry " << i;
  }
  std::sort(windows.begin(), windows.end());
  int32_t next = 0;
  for (const Window& w : windows) {
    EXPECT_EQ(w.begin, next) << what;
    next = w.begin + w.len;
    auto seq_of = [&](int32_t row) {
      return static_cast<int>(std::upper_bound(b.cu, b.cu + shape.seqs + 1, row) - b.cu) - 1;
    };
    // A window of one sequence is that sequence; in a window of several,
    // each row's bounds are its own sequence's, as offsets in the window.
    EXPECT_EQ(w.mixed, seq_of(w.begin) != seq_of(w.begin + w.len - 1)) << what;
    if (!w.mixed) {
      EXPECT_EQ(b.cu[seq_of(w.begin) + 1], w.begin + w.len) << what;
      continue;
    }
    for (int32_t row = w.begin; row < w.begin + w.len; ++row) {
      const int seq = seq_of(row);
      const int32_t bounds = b.row_bounds[row];
      EXPECT_EQ(w.begin + (bounds & 0xffff), b.cu[seq]) << what << ", row " << row;
      EXPECT_EQ(w.begin + (bounds >> 16), b.cu[seq + 1]) << what << ", row " << row;
    }
  }
  EXPECT_EQ(next, shape.tokens) << what;
}

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
  // row_bounds ends the batch's ints.
  EXPECT_EQ(b.row_bounds + shape.tokens - ints.data(),
            static_cast<std::ptrdiff_t>(IntCount(shape)));
  if (max_len <= kAttentionWindow) CheckWindows(lengths, shape, what);
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

// Best fit, longest first: 128 fills a window; 28 joins 100, the second 64
// the first; 1 finds no room.
TEST(BatchShapeTest, WindowsTakeEachSequenceWhereItFitsBest) {
  const WindowPacking packing = PackWindows({100, 28, 64, 64, 128, 1});
  EXPECT_EQ(packing.order, (std::vector<int>{4, 0, 1, 2, 3, 5}));
  EXPECT_EQ(packing.window_seqs, (std::vector<int>{1, 2, 2, 1}));
  EXPECT_TRUE(packing.Packs());
  EXPECT_FALSE(PackWindows({128, 100, 90}).Packs());
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

#include "backends/cuda/batch_shape.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace bertrt::cuda {
namespace {

int RoundUp(int n, int step) { return (n + step - 1) / step * step; }

}  // namespace

// The smallest bucket >= t: the step is the largest power of two (>= 64)
// that is at most t / 16.
int TokenBucket(int t) {
  int step = kTokenBucket;
  while (step * 2 * 16 <= t) step *= 2;
  return RoundUp(t, step);
}

int SeqBucket(int n) {
  if (n > kSeqBucket) return RoundUp(n, kSeqBucket);
  int seqs = 1;
  while (seqs < n) seqs *= 2;
  return seqs;
}

Shape PaddedShape(int t, int n, int max_len, bool hidden_state) {
  const int len = RoundUp(max_len, kLenBucket);
  int tokens = TokenBucket(t);
  // A batch already on both buckets (128 x 128) runs as it is.
  if (tokens == t && SeqBucket(n) == n) return {t, n, len, hidden_state};
  // Dummies need a token among them.
  if (tokens == t) tokens = TokenBucket(t + 1);
  const int holders = (tokens - t + kLenBucket - 1) / kLenBucket;
  // seqs <= tokens: both are multiples of 8 (or seqs <= 8 < tokens), and
  // n + holders <= t + padding.
  return {tokens, SeqBucket(n + holders), len, hidden_state};
}

void LayOutDummies(const Shape& shape, int n, int32_t* cu) {
  const int dummies = shape.seqs - n;
  if (dummies == 0) return;
  const int pad = shape.tokens - cu[n];
  const int holders = (pad + kLenBucket - 1) / kLenBucket;
  const int empty = dummies - holders;
  for (int d = 0; d < dummies; ++d) {
    const int h = d - empty;  // index among the holders
    const int len = h < 0 ? 0 : pad / holders + (h < pad % holders ? 1 : 0);
    cu[n + 1 + d] = cu[n + d] + len;
  }
}

void LongestFirst(const int32_t* cu, int seqs, int32_t* by_length) {
  std::vector<int32_t> order(seqs);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [cu](int32_t a, int32_t b) { return cu[a + 1] - cu[a] > cu[b + 1] - cu[b]; });
  for (int i = 0; i < seqs; ++i) {
    by_length[2 * i] = cu[order[i]];
    by_length[2 * i + 1] = cu[order[i] + 1] - cu[order[i]];
  }
}

BatchInts LayOutInts(int32_t* base, const Shape& shape) {
  int32_t* cu = base + 2 * static_cast<size_t>(shape.tokens);
  return {base, base + shape.tokens, cu, cu + shape.seqs + 1};
}

size_t IntCount(const Shape& shape) {
  return 2 * static_cast<size_t>(shape.tokens) + 3 * static_cast<size_t>(shape.seqs) + 1;
}

size_t IntCapacity(size_t tokens) { return 5 * tokens + 1; }

}  // namespace bertrt::cuda

#include "backends/cuda/engine/batch_shape.h"

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

WindowPacking PackWindows(const std::vector<int>& lengths) {
  constexpr int window = kAttentionWindow;
  const int n = static_cast<int>(lengths.size());
  std::vector<int> longest(n);
  std::iota(longest.begin(), longest.end(), 0);
  std::stable_sort(longest.begin(), longest.end(),
                   [&](int a, int b) { return lengths[a] > lengths[b]; });
  // Best fit: each sequence goes to the window with the least room that
  // still holds it; windows are found by their room, so a batch of n
  // sequences costs O(n * window) at most.
  std::vector<std::vector<int>> windows;
  std::vector<std::vector<int>> by_room(window + 1);  // room -> windows
  std::vector<int> room;
  for (int s : longest) {
    const int len = std::clamp(lengths[s], 0, window);  // (a longer one breaks the layout)
    int w = -1;
    for (int r = len; r <= window && w < 0; ++r)
      if (!by_room[r].empty()) {
        w = by_room[r].back();
        by_room[r].pop_back();
      }
    if (w < 0) {
      w = static_cast<int>(windows.size());
      windows.emplace_back();
      room.push_back(window);
    }
    windows[w].push_back(s);
    room[w] -= len;
    by_room[room[w]].push_back(w);
  }
  WindowPacking packing;
  for (const std::vector<int>& w : windows) {
    packing.order.insert(packing.order.end(), w.begin(), w.end());
    packing.window_seqs.push_back(static_cast<int>(w.size()));
  }
  return packing;
}

void LayOutWindows(const int32_t* cu, int seqs, const std::vector<int>& window_seqs,
                   int32_t* by_length, int32_t* row_bounds) {
  struct Window {
    int32_t begin, len;
    bool mixed;
  };
  std::vector<Window> windows;
  int s = 0;
  for (int count : window_seqs) {
    const int32_t begin = cu[s];
    if (count > 1)
      for (int i = s; i < s + count; ++i)
        for (int32_t row = cu[i]; row < cu[i + 1]; ++row)
          row_bounds[row] = (cu[i] - begin) | (cu[i + 1] - begin) << 16;
    s += count;
    windows.push_back({begin, cu[s] - begin, count > 1});
  }
  for (; s < seqs; ++s)  // the dummies; the empty ones need no window
    if (cu[s + 1] > cu[s]) windows.push_back({cu[s], cu[s + 1] - cu[s], false});
  std::stable_sort(windows.begin(), windows.end(),
                   [](const Window& a, const Window& b) { return a.len > b.len; });
  for (size_t w = 0; w < windows.size(); ++w) {
    by_length[2 * w] = windows[w].begin;
    by_length[2 * w + 1] = windows[w].len | (windows[w].mixed ? kMixedWindow : 0);
  }
  std::fill(by_length + 2 * windows.size(), by_length + 2 * seqs, 0);
}

BatchInts LayOutInts(int32_t* base, const Shape& shape) {
  int32_t* cu = base + 2 * static_cast<size_t>(shape.tokens);
  int32_t* by_length = cu + shape.seqs + 1;
  int32_t* pool_start = by_length + 2 * shape.seqs;
  return {base, base + shape.tokens, cu, by_length, pool_start, pool_start + shape.seqs};
}

size_t IntCount(const Shape& shape) {
  return 3 * static_cast<size_t>(shape.tokens) + 4 * static_cast<size_t>(shape.seqs) + 1;
}

size_t IntCapacity(size_t tokens) { return 7 * tokens + 1; }

}  // namespace bertrt::cuda

// The shape a batch runs as on the CUDA engine, and the ints that describe
// it on the device. Plain C++ (no CUDA), so that the bucket arithmetic is
// tested on machines without a GPU; C++17, so that kernels include it too.
//
// Launch overhead dominates small batches, so each batch runs as a padded
// shape (a bucket) whose kernels replay as one CUDA graph. The padding tokens
// form dummy sequences after the real ones; a graph serves every batch that
// rounds to its bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

namespace bertrt::cuda {

// Buckets: tokens to a multiple of 64 up to 2048 and then to 16 steps per
// doubling (at most 6.25% padding), so that a server's batches meet few
// shapes: each new shape runs eagerly until its graph is captured, and costs
// a capture. The sequence count goes to a power of two up to 8 and then to a
// multiple of 8 (batch 1 at 128 tokens runs as it is, not as 8 sequences);
// max_len to a multiple of 64.
inline constexpr int kTokenBucket = 64;
inline constexpr int kSeqBucket = 8;
inline constexpr int kLenBucket = 64;

int TokenBucket(int tokens);
int SeqBucket(int seqs);

struct Shape {
  int tokens, seqs, max_len;
  bool hidden_state;
  // RunOptions::normalize: a run without the model's Normalize module is a
  // graph of its own.
  bool normalize = true;
  std::tuple<int, int, int, bool, bool> Key() const {
    return {tokens, seqs, max_len, hidden_state, normalize};
  }
  friend bool operator==(const Shape& a, const Shape& b) { return a.Key() == b.Key(); }
  friend bool operator<(const Shape& a, const Shape& b) { return a.Key() < b.Key(); }
};

// The bucket of a batch of `tokens` tokens in `seqs` sequences, the longest
// `max_len`. Dummy sequences hold the padding, none longer than kLenBucket
// (so max_len's bucket holds them). A dummy may be empty, but only when
// another holds a token (LayOutDummies puts the empty ones first): so every
// sequence starts at a row of the batch, and a kernel that reads each
// sequence's first row never reads past the last. Before, every dummy took a
// token, and a ragged batch of 2,426 tokens in 32 sequences ran as 2,560
// tokens in 40 (its 8 dummies did not fit in the 6 tokens of 2,432).
Shape PaddedShape(int tokens, int seqs, int max_len, bool hidden_state);

// cu_seqlens of the dummies: cu[0..n] holds the n real sequences' bounds
// (cu[n] = their tokens), and cu[n + 1..shape.seqs] gets the dummies', the
// empty ones first, the padding spread evenly over the others.
void LayOutDummies(const Shape& shape, int n, int32_t* cu);

// by_length[2i], by_length[2i + 1] = the first token and the length of the
// i-th longest sequence (ties in index order). The attention kernels start
// their blocks in this order: a ragged batch's blocks take time in
// proportion to their sequence's length, and with the long ones started
// first the short ones fill the last gaps instead of a long one starting
// last. A block reads its sequence's bounds here, in one step (an index into
// cu_seqlens would put a second dependent load before its first).
void LongestFirst(const int32_t* cu, int seqs, int32_t* by_length);

// Attention windows. The TMA attention kernel's units hold 128 query rows
// and its key tiles 128 keys, so a batch of sequences no longer than that ran
// one unit per sequence and head, each costing what a full one does: 128
// sequences of 8..32 tokens ran as many units as 128 x 128. Laid out so that
// consecutive sequences fill windows of kAttentionWindow rows, the batch
// runs one unit per window and head, each row attending to its own
// sequence's keys (ops/attention.h's AttentionArgs::row_bounds).
inline constexpr int kAttentionWindow = 128;
// In by_length, the length of a window that holds more than one sequence
// carries this flag: only those windows' rows need their bounds read and
// their scores masked by them.
inline constexpr int32_t kMixedWindow = 1 << 30;

// The order in which to lay out sequences of these lengths (each at most
// kAttentionWindow) so that consecutive runs of them fill windows: best fit,
// longest first. order[k] is the index of the sequence laid out k-th;
// window_seqs holds the sequences of each window, in layout order.
struct WindowPacking {
  std::vector<int> order;
  std::vector<int> window_seqs;
  // Whether some window holds more than one sequence.
  bool Packs() const { return window_seqs.size() < order.size(); }
};
WindowPacking PackWindows(const std::vector<int>& lengths);

// For a batch laid out in windows (cu over `seqs` sequences: the real ones
// first, in windows of window_seqs sequences; then the dummies, each a window
// of its own but for the empty ones): by_length describes the windows as
// LongestFirst describes sequences, longest first, a window of several
// sequences with kMixedWindow in its length, then (0, 0) up to `seqs`
// entries. row_bounds[token], for the rows of those windows only, = lo |
// hi << 16: the token's sequence's first row and end as offsets from its
// window's first row.
void LayOutWindows(const int32_t* cu, int seqs, const std::vector<int>& window_seqs,
                   int32_t* by_length, int32_t* row_bounds);

// A batch's ints on the device, back to back so that one copy moves them:
// ids [tokens] | token types [tokens] | cu_seqlens [seqs + 1] | by_length [2 seqs] |
// pool_start [seqs] (RaggedBatch's, 0 for the dummies) |
// row_bounds [tokens] (LayOutWindows', when the batch is laid out in windows).
struct BatchInts {
  int32_t *ids, *types, *cu, *by_length, *pool_start, *row_bounds;
};
BatchInts LayOutInts(int32_t* base, const Shape& shape);
size_t IntCount(const Shape& shape);
// Enough for any shape of at most `tokens` tokens (a shape has no more
// sequences than tokens).
size_t IntCapacity(size_t tokens);

}  // namespace bertrt::cuda

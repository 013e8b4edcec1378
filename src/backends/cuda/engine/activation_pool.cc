#include "backends/cuda/engine/activation_pool.h"

#include <algorithm>

#include "backends/cuda/engine/batch_shape.h"

namespace bertrt::cuda {
namespace {

constexpr size_t kAlign = 256;
// The pool grows in steps of this many tokens and (SPLADE) sequences.
constexpr int kTokenGranularity = 256;
constexpr int kSeqGranularity = 64;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
int RoundUp(int n, int step) { return (n + step - 1) / step * step; }

}  // namespace

size_t ActivationPool::PooledWidth() const {
  size_t width = std::max(config_.hidden_size, config_.pooled_width());
  for (const DenseSpec& d : config_.dense) width = std::max<size_t>(width, d.out_features);
  return width;
}

size_t ActivationPool::SparseWidth() const {
  return config_.head == HeadKind::kSparseEmbedding ? config_.vocab_size : 0;
}

std::vector<size_t> ActivationPool::Regions(size_t t, size_t seqs) const {
  const size_t h = config_.hidden_size, e = element_size_, pooled = PooledWidth();
  const size_t vocab = SparseWidth();
  return {t * h * e,
          t * h * e,
          t * 3 * h * e,
          t * h * e,
          t * config_.intermediate_size * (config_.gated_ffn ? 2 : 1) * e,
          t * h * 4,
          t * pooled * 4,
          t * logits_width_ * 4,
          seqs * vocab * 4,
          config_.dense.empty() ? 0 : t * pooled * 4,
          std::min<size_t>(t, kMaskedLmChunkTokens) * vocab * e,
          IntCapacity(t) * 4,
          config_.gated_ffn ? t * config_.intermediate_size * e : 0,
          input8_ ? t * std::max<size_t>(h, config_.intermediate_size) : 0,
          input8_ ? t * 4 : 0,
          input8_ ? t * 4 : 0};
}

bool ActivationPool::Fits(int tokens, int seqs) const {
  return tokens <= capacity_tokens_ && (SparseWidth() == 0 || seqs <= capacity_sparse_seqs_);
}

Status ActivationPool::Reserve(int tokens, int seqs, const std::string& hint) {
  if (Fits(tokens, seqs)) return Status::Ok();
  const int t = RoundUp(std::max(tokens, capacity_tokens_), kTokenGranularity);
  // A batch has at most as many sequences as tokens.
  const int s = SparseWidth() == 0
                    ? 0
                    : std::min(t, RoundUp(std::max(seqs, capacity_sparse_seqs_), kSeqGranularity));
  const std::vector<size_t> regions = Regions(t, s);
  size_t total = 0;
  for (size_t r : regions) total += AlignUp(r);
  // Free the old pool first: the two need not fit side by side.
  ++generation_;
  capacity_tokens_ = 0;
  capacity_sparse_seqs_ = 0;
  RETURN_IF_ERROR(pool_.Allocate(total, "activations of " + std::to_string(t) + " tokens", hint));
  std::vector<char*> p;
  char* next = static_cast<char*>(pool_.get());
  for (size_t r : regions) {
    p.push_back(next);
    next += AlignUp(r);
  }
  // hidden states, pooled rows (or a Dense module's), logits and sparse
  // vectors can all come back from one batch.
  const size_t float_count =
      (regions[5] + regions[6] + regions[7] + regions[8]) / sizeof(float);
  RETURN_IF_ERROR(host_ints_.Allocate(IntCapacity(t) * sizeof(int32_t), "batch ids"));
  RETURN_IF_ERROR(host_floats_.Allocate(float_count * sizeof(float), "outputs"));
  ws_ = Workspace{p[0],
                  p[1],
                  p[2],
                  p[3],
                  p[4],
                  reinterpret_cast<float*>(p[5]),
                  reinterpret_cast<float*>(p[6]),
                  reinterpret_cast<float*>(p[7]),
                  reinterpret_cast<float*>(p[9]),
                  regions[10] ? p[10] : nullptr,
                  regions[8] ? reinterpret_cast<float*>(p[8]) : nullptr,
                  reinterpret_cast<int32_t*>(p[11]),
                  static_cast<int32_t*>(host_ints_.get()),
                  static_cast<float*>(host_floats_.get()),
                  regions[12] ? p[12] : nullptr,
                  regions[13] ? p[13] : nullptr,
                  regions[14] ? reinterpret_cast<float*>(p[14]) : nullptr,
                  regions[15] ? reinterpret_cast<int32_t*>(p[15]) : nullptr};
  capacity_tokens_ = t;
  capacity_sparse_seqs_ = s;
  return Status::Ok();
}

}  // namespace bertrt::cuda

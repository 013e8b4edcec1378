// The CUDA engine's activation memory: one device allocation for every
// intermediate of the forward, laid out for a capacity in tokens and grown on
// demand, and the pinned host buffers that stage a batch's ids in and its
// outputs out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/util/device_memory.h"
#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// Views into the pool and the pinned buffers for a capacity of some tokens
// (a shape has no more sequences than tokens).
struct Workspace {
  // Compute precision; inter is [tokens, 2 x intermediate] for a gated FFN,
  // whose activated product goes to `gated` [tokens, intermediate] (null
  // otherwise).
  void *x, *tmp, *qkv, *ctx, *inter;
  float *hidden_f32, *pooled_f32, *logits_f32;
  float* dense_f32;  // a sentence-transformers Dense module's output (pooled_f32 the other's)
  // SPLADE: a chunk of tokens' vocabulary logits (compute precision) and the
  // pooled [seqs, vocab] vectors; null for other heads.
  void* mlm_logits;
  float* sparse_f32;
  int32_t* ints;       // the batch on the device, as BatchInts lays it out
  int32_t* host_ints;  // pinned: the same, staged for one copy
  float* host_floats;  // pinned: the outputs coming back
  void* gated;
  // An 8-bit engine's GEMM input, quantized [tokens, max(hidden,
  // intermediate)] bytes (E4M3, or uint8 with each row's scale and zero
  // point in input8_scales and input8_zeros [tokens]); null otherwise.
  void* input8;
  float* input8_scales;
  int32_t* input8_zeros;
};

// SPLADE's masked-LM head runs over at most this many tokens at a time, so
// that their [tokens, vocab] logits stay bounded (62 MB in fp16 for BERT's
// 30,522 entries).
inline constexpr int kMaskedLmChunkTokens = 1024;

class ActivationPool {
 public:
  // `element_size`: bytes per activation in the compute precision;
  // `logits_width`: the classifier's outputs per row; `input8`: room
  // for the 8-bit inputs of an 8-bit engine's GEMMs.
  ActivationPool(const ModelConfig& config, size_t element_size, int logits_width,
                 bool input8 = false)
      : config_(config),
        element_size_(element_size),
        logits_width_(logits_width),
        input8_(input8) {}

  // Makes room for batches of `tokens` tokens in `seqs` sequences, in steps
  // of 256 tokens and 64 sequences so that slowly growing batches do not
  // reallocate each time. Growing moves the pool: the workspace changes and
  // generation() counts up (CUDA graphs hold its addresses). `hint` says how
  // to need less.
  Status Reserve(int tokens, int seqs, const std::string& hint);
  // Whether a batch of `tokens` tokens in `seqs` sequences fits as it is.
  bool Fits(int tokens, int seqs) const;
  const Workspace& workspace() const { return ws_; }
  int capacity_tokens() const { return capacity_tokens_; }
  uint64_t generation() const { return generation_; }
  size_t bytes() const { return pool_.size(); }

 private:
  // Byte sizes of the pool's regions for `tokens` tokens and (SPLADE's
  // vectors) `seqs` sequences, in Workspace order.
  std::vector<size_t> Regions(size_t tokens, size_t seqs) const;
  // Floats per sequence of pooled_f32 (and dense_f32): the hidden size, or
  // the widest vector a sentence-embedding head makes.
  size_t PooledWidth() const;
  // Vocabulary columns of the SPLADE regions: the vocabulary, or 0.
  size_t SparseWidth() const;
  // Rows of SPLADE's pooled vectors: sized by sequences, not tokens, since
  // a row is a whole vocabulary (4 GB of device and pinned memory at 16,384
  // tokens for BERT's 30,522 entries, where a batch of 64 sequences needs 8
  // MB). The other per-sequence regions are a hidden size or a few logits
  // wide and follow the tokens.

  const ModelConfig& config_;
  size_t element_size_;
  int logits_width_;
  bool input8_;
  int capacity_tokens_ = 0;
  int capacity_sparse_seqs_ = 0;
  uint64_t generation_ = 0;
  DeviceBuffer pool_;
  PinnedBuffer host_ints_, host_floats_;
  Workspace ws_{};
};

}  // namespace bertrt::cuda

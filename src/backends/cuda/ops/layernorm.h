// The launchers of layernorm.cu (ops/launch.h says what they take).
#pragma once

#include <cstdint>

#include "backends/cuda/ops/launch.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

struct EmbeddingArgs {
  const int32_t* ids;         // [tokens], validated against the vocabulary
  const int32_t* types;       // [tokens]
  const int32_t* cu_seqlens;  // [num_seqs + 1]
  int num_seqs;
  int num_tokens;
  const void* word;      // [vocab, hidden]
  const void* position;  // [max_pos, hidden]; null: none (rotary positions)
  const void* type;      // [type_vocab, hidden]
  const float* gamma;
  const float* beta;
  int hidden;
  float eps;
  void* out;  // [tokens, hidden]
};

// out[t] = LayerNorm(word[ids[t]] + position[t - start of its sequence] + type[types[t]]),
// without the position term where there is no table.
Status EmbedLayerNorm(Precision p, const EmbeddingArgs& a, Stream stream);

// out[r] = LayerNorm(in[r]) * gamma + beta; in may equal out.
Status LayerNorm(Precision p, const void* in, void* out, int rows, int hidden, const float* gamma,
                 const float* beta, float eps, Stream stream);

}  // namespace bertrt::cuda

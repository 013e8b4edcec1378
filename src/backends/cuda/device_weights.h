// The model's weights on the GPU, uploaded once at engine creation: GEMM
// weights, GEMM biases and embedding tables in the compute precision, Q/K/V
// packed into one [3h, h] weight and [3h] bias; LayerNorm parameters and the
// small classifier head in fp32.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/device_memory.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// attn_gamma/attn_beta are null for a pre-norm layer without its attention
// LayerNorm (ModernBERT's first).
struct DeviceLayer {
  const void *qkv_w, *qkv_b, *attn_out_w, *attn_out_b, *ffn_in_w, *ffn_in_b, *ffn_out_w,
      *ffn_out_b;
  const float *attn_gamma, *attn_beta, *ffn_gamma, *ffn_beta;
};

struct DeviceWeights {
  // position: the table's row position_offset, where token 0's lies.
  const void *word = nullptr, *position = nullptr, *type = nullptr;
  const float *emb_gamma = nullptr, *emb_beta = nullptr;
  // MPNet's relative position bias table (RelativePositionBiasTable); null: none.
  const float* relative_bias = nullptr;
  std::vector<DeviceLayer> layers;
  // ModernBERT: the rotary tables (RotaryTable, fp32 [max_positions][head_dim / 2][2]) of the
  // global and the local layers, and the final LayerNorm; null: none.
  const float *rotary_global = nullptr, *rotary_local = nullptr;
  const float *final_gamma = nullptr, *final_beta = nullptr;
  const void *pooler_w = nullptr, *pooler_b = nullptr;        // null when the head has no pooler
  // ModernBERT's prediction head's LayerNorm after the pooler's dense; null: none.
  const float *pooler_gamma = nullptr, *pooler_beta = nullptr;
  const float *classifier_w = nullptr, *classifier_b = nullptr;  // null for base / embedding
  int classifier_out = 0;
  // Sentence-transformers Dense modules, fp32 (b null without a bias).
  struct Dense {
    const float *w = nullptr, *b = nullptr;
  };
  std::vector<Dense> dense;
  // SPLADE's masked-LM head: transform and decoder in the compute precision
  // (the decoder's weight is `word` when tied), LayerNorm in fp32.
  const void *mlm_dense_w = nullptr, *mlm_dense_b = nullptr;
  const void *mlm_decoder_w = nullptr, *mlm_decoder_b = nullptr;
  const float *mlm_gamma = nullptr, *mlm_beta = nullptr;
  size_t bytes = 0;
  std::vector<DeviceBuffer> storage;  // owns everything above
};

// Uploads a model that passed CheckModel. `stream` orders the conversion
// kernels.
StatusOr<DeviceWeights> UploadWeights(const Model& model, Precision precision,
                                      cudaStream_t stream);

}  // namespace bertrt::cuda

// The CPU backend's ops (ops/encoder_ops.h): the one forward
// (model/encoder_forward.h) runs on these, in fp32, over a workspace of
// plain host memory. The kernels are cpu_ops.h's and cpu_linear.h's.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/cpu_ops.h"
#include "bertrt/engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "model/rotary.h"
#include "ops/encoder_ops.h"

namespace bertrt::cpu {

// One layer's weights, packed for the GEMMs.
struct Layer {
  Linear qkv, attn_out, ffn_in, ffn_out;
  ops::Norm attn_norm, ffn_norm;
};

// What the ops read of the model besides each op's weights.
struct ModelTables {
  EmbeddingTables embeddings;
  std::vector<float> relative_bias;  // MPNet's (RelativePositionBiasTable); empty: none
  RotaryTables rotary;  // ModernBERT's (RotaryTablesFor)
};

// A forward's buffers (ops::Buffers) carved out of one host allocation that
// grows on demand and is kept across runs, plus attention's scratch.
class Workspace {
 public:
  // Sizes the buffers for `batch` (SPLADE's chunked logits with
  // `masked_lm_chunk` rows); `labels` is the classifier's width (0: none).
  void Reserve(const ModelConfig& config, const RaggedBatch& batch, int labels, int threads,
               int masked_lm_chunk);
  const ops::Buffers<float*>& buffers() const { return buffers_; }
  float* scratch() const { return scratch_; }
  size_t bytes() const { return storage_.size() * sizeof(float); }

 private:
  std::vector<float> storage_;
  ops::Buffers<float*> buffers_;
  float* scratch_ = nullptr;
};

class EncoderOps {
 public:
  using Buf = float*;
  using ConstBuf = const float*;
  using Layer = cpu::Layer;
  using LinearWeights = cpu::Linear;
  using SmallLinearWeights = cpu::Linear;  // the heads' fp32 rows go through the same GEMMs
  // No first-query attention or split query: the compact last layer runs
  // attention for every query and keeps the first rows after it.
  static constexpr bool kFirstQueryAttention = false;
  static constexpr bool kSplitQuery = false;
  // SPLADE's tokens per chunk: [256, vocab] logits (31 MB at BERT's vocabulary).
  static constexpr int kMaskedLmChunkTokens = 256;

  // Everything given outlives this; `batch` passed ValidateBatch.
  EncoderOps(const ModelConfig& config, const ModelTables& tables, const RaggedBatch& batch,
             const Workspace& workspace, MatmulContext* matmul, int threads)
      : c_(config),
        tables_(tables),
        batch_(batch),
        buffers_(workspace.buffers()),
        scratch_(workspace.scratch()),
        matmul_(matmul),
        threads_(threads) {}

  const ops::Buffers<float*>& buffers() const { return buffers_; }
  float* At(float* b, size_t elements) const { return b + elements; }
  const float* At(const float* b, size_t elements) const { return b + elements; }

  Status EmbedLayerNorm(float* out);
  // (feeds: no input form of its own to make.)
  Status LayerNorm(const float* in, float* out, int rows, ops::Norm norm,
                   const LinearWeights* feeds = nullptr);
  Status Linear(const char* name, const cpu::Linear& w, const float* x, int rows, float* y,
                ops::Tail<const float*, LinearWeights> tail);
  Status Rotary(float* qkv, bool local);
  Status Attention(const Layer& layer, int local_window, const float* qkv, float* ctx);
  Status GatedActivation(const float* in, int rows, float* out);
  Status GatherFirstTokens(const float* in, float* out);
  Status PoolSequences(const float* x, Pooling pooling, float* out, int out_stride);
  Status ConvertToFloat(const float* in, float* out, size_t count);
  Status ConvertFromFloat(const float* in, float* out, size_t count);
  Status ActivateToFloat(const float* in, float* out, size_t count, bertrt::DenseActivation act);
  Status LayerNormFloat(float* x, int rows, ops::Norm norm);
  Status SmallLinear(const cpu::Linear& w, const float* x, int rows, float* y);
  Status SmallLinearFloat(const cpu::Linear& w, const float* x, int rows, float* y);
  Status DenseActivation(float* x, size_t count, bertrt::DenseActivation act);
  Status L2Normalize(float* x, int rows, int width);
  Status ZeroFloat(float* x, size_t count);
  Status SpladePool(const float* logits, int first_token, int rows, float* out);
  void BeginHead() {}
  Status EndHead() { return Status::Ok(); }

 private:
  int seqs() const { return batch_.num_seqs(); }
  const int32_t* cu() const { return batch_.cu_seqlens.data(); }

  const ModelConfig& c_;
  const ModelTables& tables_;
  const RaggedBatch& batch_;
  const ops::Buffers<float*>& buffers_;
  float* const scratch_;
  MatmulContext* const matmul_;
  const int threads_;
};

static_assert(ops::EncoderOps<EncoderOps>);

// The CPU ops with each Linear's input seen before it runs (calibration of
// int8 GEMMs): `see(linear, input, count)`.
class ObservingOps : public EncoderOps {
 public:
  using See = std::function<void(const cpu::Linear&, const float*, size_t)>;
  ObservingOps(const ModelConfig& config, const ModelTables& tables, const RaggedBatch& batch,
               const Workspace& workspace, MatmulContext* matmul, int threads, See see)
      : EncoderOps(config, tables, batch, workspace, matmul, threads), see_(std::move(see)) {}

  Status Linear(const char* name, const cpu::Linear& w, const float* x, int rows, float* y,
                ops::Tail<const float*, LinearWeights> tail) {
    see_(w, x, size_t(rows) * w.in());
    return EncoderOps::Linear(name, w, x, rows, y, tail);
  }

 private:
  See see_;
};

static_assert(ops::EncoderOps<ObservingOps>);

}  // namespace bertrt::cpu

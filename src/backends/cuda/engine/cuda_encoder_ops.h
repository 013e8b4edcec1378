// The CUDA backend's ops (ops/encoder_ops.h): the one forward
// (model/encoder_forward.h) runs on these over one Shape's workspace on one
// stream, each op enqueueing its kernels (the launchers of cuda/ops/) or GEMM
// (linear.h) and, when the forward is profiled, a timer stamp after itself.
// Host-compiled: the forward is C++20, the kernels' launchers are plain C++.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backends/cuda/engine/activation_pool.h"
#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/engine/device_weights.h"
#include "backends/cuda/engine/op_profiler.h"
#include "backends/cuda/engine/tuning.h"
#include "backends/cuda/gemm/linear.h"
#include "backends/cuda/ops/attention.h"
#include "backends/cuda/ops/launch.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "ops/encoder_ops.h"

namespace bertrt::cuda {

// What the ops read besides the batch: fixed when the engine is made.
struct OpsContext {
  const ModelConfig& config;
  const CudaEngineOptions& options;
  const Tuning& tuning;
  const DeviceWeights& weights;
  const LinearLayers& linear;
  bool overlap_launch;
};

// The forward's view of a workspace's buffers.
ops::Buffers<void*> BuffersOf(const Workspace& ws);

class EncoderOps {
 public:
  using Buf = void*;
  using ConstBuf = const void*;
  using Layer = DeviceLayer;
  using LinearWeights = DeviceLinear;
  using SmallLinearWeights = DeviceSmallLinear;
  static constexpr bool kFirstQueryAttention = true;
  static constexpr bool kSplitQuery = true;
  static constexpr int kMaskedLmChunkTokens = cuda::kMaskedLmChunkTokens;

  // `attention`: every layer's attention arguments for `shape` in `ws` (but
  // for the weights each prefetches); everything given outlives this.
  EncoderOps(const OpsContext& context, const Shape& shape, const Workspace& ws,
             const AttentionArgs& attention, cudaStream_t stream, OpTrace* trace);

  const ops::Buffers<void*>& buffers() const { return buffers_; }
  void* At(void* b, size_t elements) const { return static_cast<char*>(b) + elements * e_; }
  const void* At(const void* b, size_t elements) const {
    return static_cast<const char*>(b) + elements * e_;
  }

  Status EmbedLayerNorm(void* out);
  // With `feeds` an 8-bit Linear: its 8-bit input made in the same pass
  // (Tuning::fused_quantization).
  Status LayerNorm(const void* in, void* out, int rows, ops::Norm norm,
                   const DeviceLinear* feeds = nullptr);
  Status Linear(const char* name, const DeviceLinear& w, const void* x, int rows, void* y,
                ops::Tail<const void*, DeviceLinear> tail);
  // Linear over outputs [first, first + count) of `w` alone.
  Status LinearOutputs(const char* name, const DeviceLinear& w, int first, int count, const void* x,
                       int rows, void* y);
  Status Rotary(void* qkv, bool local);
  Status Attention(const DeviceLayer& layer, int local_window, const void* qkv, void* ctx);
  // FirstQueryAttentionArgs' q/kv layout; `prefetch_for` (null: none) the
  // layer whose weights the kernel pulls into L2 for the GEMMs after it.
  Status FirstQueryAttention(const DeviceLayer* prefetch_for, const void* q, int q_ld,
                             bool q_by_sequence, const void* kv, int kv_ld, void* out);
  bool FirstQueryAttentionOn() const { return c_.tuning.first_query_attention; }
  bool SplitQueryPays() const;
  Status GatedActivation(const void* in, int rows, void* out);
  Status GatherFirstTokens(const void* in, void* out);
  Status PoolSequences(const void* x, Pooling pooling, float* out, int out_stride);
  Status ConvertToFloat(const void* in, float* out, size_t count);
  Status ConvertFromFloat(const float* in, void* out, size_t count);
  Status ActivateToFloat(const void* in, float* out, size_t count, bertrt::DenseActivation act);
  Status LayerNormFloat(float* x, int rows, ops::Norm norm);
  Status SmallLinear(const DeviceSmallLinear& w, const void* x, int rows, float* y);
  Status SmallLinearFloat(const DeviceSmallLinear& w, const float* x, int rows, float* y);
  Status DenseActivation(float* x, size_t count, bertrt::DenseActivation act);
  Status L2Normalize(float* x, int rows, int width);
  Status ZeroFloat(float* x, size_t count);
  Status SpladePool(const void* logits, int first_token, int rows, float* out);
  // The head's kernels are timed as one operation.
  void BeginHead() { in_head_ = true; }
  Status EndHead() {
    in_head_ = false;
    return Stamp("head", 0);
  }

 private:
  // Marks the end of an operation in a profiled forward (none inside the head).
  Status Stamp(const char* name, double flops) {
    return trace_ && !in_head_ ? trace_->After(name, flops, stream_) : Status::Ok();
  }
  // Linear's FP8 GEMM with the erf GELU, making `next`'s E4M3 input from it.
  Status Fp8GeluFeedingFp8(const char* name, const DeviceLinear& w, const void* x8, float scale,
                           int rows, void* y, const DeviceLinear& next);
  // Weights prefetched by the attention before `layer`'s GEMMs (small batches).
  PrefetchRanges PrefetchFor(const DeviceLayer& layer) const;

  const OpsContext& c_;
  const ModelConfig& config_;
  const Precision p_;
  const Shape& shape_;
  const ops::Buffers<void*> buffers_;
  const AttentionArgs& attention_;
  const cudaStream_t stream_;
  const Stream kernels_;
  OpTrace* const trace_;
  const BatchInts ints_;
  const int t_, n_, h_;
  const size_t e_;  // bytes of one activation or weight element
  // The workspace's 8-bit GEMM input (8-bit engines; the rows' scales and
  // zero points: int8).
  void* const input8_;
  float* const input8_scales_;
  int32_t* const input8_zeros_;
  // When an 8-bit Linear's input was made by the op before (Tail::feeds):
  // input8_ (with input8_scales_ and input8_zeros_: int8) holds `of` in
  // `linear`'s 8-bit format.
  struct {
    const void* of = nullptr;
    const DeviceLinear* linear = nullptr;
  } input8_image_;
  bool Input8MadeFor(const void* x, const DeviceLinear& w) const {
    return input8_image_.of == x && input8_image_.linear == &w;
  }
  bool in_head_ = false;
};

static_assert(ops::EncoderOps<EncoderOps>);

}  // namespace bertrt::cuda

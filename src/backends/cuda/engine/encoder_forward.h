// The model's forward on the GPU: the one forward (model/encoder_forward.h)
// on the CUDA ops (cuda_encoder_ops.h), whose head's fp32 outputs are the
// only data copied back. It runs over the packed ragged batch (no padding
// anywhere) of a Shape, in the buffers of a Workspace: the engine runs it
// eagerly, and the graph cache captures it.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "backends/cuda/engine/activation_pool.h"
#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/engine/cuda_encoder_ops.h"
#include "backends/cuda/engine/device_weights.h"
#include "backends/cuda/engine/op_profiler.h"
#include "backends/cuda/engine/tuning.h"
#include "backends/cuda/gemm/epilogue.h"
#include "backends/cuda/gemm/linear.h"
#include "backends/cuda/ops/attention.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/head_outputs.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "model/encoder_forward.h"

namespace bertrt::cuda {

class EncoderForward {
 public:
  // Everything given outlives this; `outputs`: the model's (DescribeOutputs).
  EncoderForward(const ModelConfig& config, const std::vector<OutputDescription>& outputs,
                 const CudaEngineOptions& options, const Tuning& tuning,
                 const DeviceWeights& weights,
                 const LinearLayers& linear, int compute_capability, int sm_count,
                 bool overlap_launch);

  // Every kernel and GEMM of the forward of `shape` over `ws` on `stream`,
  // nothing else; with a trace, a timer stamp after each operation. Reads
  // only what construction fixed and `ws` (the GEMMs lock themselves), so
  // that the capture thread runs it while the request thread does too.
  Status Run(const Shape& shape, const Workspace& ws, cudaStream_t stream, OpTrace* trace) const;

  // Whether attention takes `shape`'s sequences in packed windows (the
  // batch is then staged so: StageBatch).
  bool TakesWindows(const Shape& shape, const Workspace& ws) const {
    return AttentionArgsFor(shape, ws).row_bounds != nullptr;
  }
  // Where the head leaves `array` in `ws`, in fp32, rows as DescribeOutputs
  // says.
  const float* DeviceArray(const Workspace& ws, HeadArray array) const;
  // The most operations a forward has: at most twelve per layer (a compact
  // pre-norm layer with rotary positions and a gated FFN), the embedding and
  // the head.
  size_t MaxOperations() const { return 2 + 12 * weights_.forward.layers.size(); }
  // CudaEngineOptions::approximate_erf_gelu took effect.
  bool ErfGeluAsTanh() const {
    return ffn_epilogue_ == Epilogue::kBiasGeluTanh && config_.hidden_act == HiddenAct::kGelu;
  }

 private:
  // The attention kernel's arguments for `shape` in `ws`, with row_bounds
  // set where it takes packed windows.
  AttentionArgs AttentionArgsFor(const Shape& shape, const Workspace& ws) const;

  const ModelConfig& config_;
  const std::vector<OutputDescription>& outputs_;
  const DeviceWeights& weights_;
  // The options and tuning switches too (ops_context_.options, .tuning).
  const OpsContext ops_context_;
  const int compute_capability_, sm_count_;
  const Epilogue ffn_epilogue_;  // for ErfGeluAsTanh
};

}  // namespace bertrt::cuda

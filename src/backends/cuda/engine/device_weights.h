// The model's weights on the GPU, uploaded once at engine creation: GEMM
// weights, GEMM biases and embedding tables in the compute precision, Q/K/V
// packed into one [3h, h] weight and [3h] bias; LayerNorm parameters and the
// small classifier head in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/util/device_memory.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "model/weight_schema.h"
#include "ops/encoder_ops.h"

namespace bertrt::cuda {

// A GEMM's weight [out, in] and bias [out], in the compute precision; or,
// for an 8-bit model's encoder Linear, its 8-bit weight `w8` [out, in] (w
// null) in `format` with its scales (QuantizedLinear): fp8, E4M3 with one
// weight scale and the input's; int8, int8 with a scale per output, each
// output's weight sum (int8_gemm.h) and the multipliers that take an input
// column onto the integer grid (1 / (smoothing divisor * input scale),
// the input scale 1 per token).
struct DeviceLinear {
  const void* w = nullptr;
  const void* b = nullptr;
  int in = 0, out = 0;
  const void* w8 = nullptr;
  QuantFormat format = QuantFormat::kFp8;
  float weight_scale = 0.0f, input_scale = 0.0f;  // fp8; int8: input_scale 0 per token
  const float* weight_scales = nullptr;           // int8 [out]
  const int32_t* weight_sums = nullptr;           // int8 [out]
  const float* input_multipliers = nullptr;       // int8 [in]
  bool fp8() const { return w8 && format == QuantFormat::kFp8; }
  bool int8() const { return w8 && format == QuantFormat::kInt8; }
  // Outputs [first, first + count) alone; `element` bytes per weight of `w`.
  DeviceLinear Outputs(int first, int count, size_t element) const;
  // Where the weight's bytes start on the device.
  const void* weight() const { return w8 ? w8 : w; }
};

// A small head's weight [out, in] and bias [out] (null: none), fp32 (SmallLinear).
struct DeviceSmallLinear {
  const float* w = nullptr;
  const float* b = nullptr;
  int in = 0, out = 0;
};

// attn_norm is absent for a pre-norm layer without its attention LayerNorm
// (ModernBERT's first).
struct DeviceLayer {
  DeviceLinear qkv, attn_out, ffn_in, ffn_out;
  ops::Norm attn_norm, ffn_norm;
};

// The forward's weights (model/weight_schema.h) in the CUDA types.
using DeviceForwardWeights = model::WeightsOf<DeviceLayer, DeviceLinear, DeviceSmallLinear>;

struct DeviceWeights {
  // The embedding tables in the compute precision; position: the table's row
  // position_offset, where token 0's lies (null: none, rotary positions).
  const void *word = nullptr, *position = nullptr, *type = nullptr;
  // MPNet's relative position bias table (RelativePositionBiasTable); null: none.
  const float* relative_bias = nullptr;
  // ModernBERT: the rotary tables (RotaryTable, fp32 [max_positions][head_dim / 2][2]) of the
  // global and the local layers; null: none.
  const float *rotary_global = nullptr, *rotary_local = nullptr;
  DeviceForwardWeights forward;
  size_t bytes = 0;
  std::vector<DeviceBuffer> storage;  // owns everything above
};

// Uploads a model that passed CheckModel (an 8-bit model's quantized
// Linears as their 8-bit bytes and scales). `stream` orders the conversion kernels.
StatusOr<DeviceWeights> UploadWeights(const Model& model, Precision precision, cudaStream_t stream);

}  // namespace bertrt::cuda

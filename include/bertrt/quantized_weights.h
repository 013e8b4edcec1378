// A model whose encoder Linears are quantized to 8 bits (int8 or fp8) once,
// as an 8-bit plan stores them (`bertrt build --precision int8|fp8`): the
// 8-bit weights and their scales, the accuracy report measured when they were
// made, and the check an engine made from them passes at load.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bertrt/engine.h"
#include "bertrt/tensor.h"

namespace bertrt {

// One Linear's 8-bit GEMM operands: y = s * (q(x / smoothing) . weights[o])
// + bias[o], s = input_scale * (int8: scales[o]; fp8: scales[0]), with the
// bias and the epilogue the Linear's own. The weights' dtype is the format.
struct QuantizedLinear {
  // [out, in]: I8 in [-127, 127], w[o][i] * smoothing[i] / scales[o] rounded
  // (int8); or F8_E4M3, w[o][i] / scales[0] rounded (fp8).
  Tensor weights;
  // F32, > 0: [out] each output row's quantization step (int8), or [1] the
  // tensor's (fp8).
  Tensor scales;
  Tensor smoothing;  // [in] F32, > 0: SmoothQuant's divisor per input column (ones: none)
  // The input's scale per tensor (a calibrated |x| bound / 127 or / 448); 0
  // (int8 alone): each row takes its own range (per token, uint8 with a
  // zero point).
  float input_scale = 0.0f;
};

// An int8 Linear's input, column k, is multiplied by this before it is
// rounded: 1 / (smoothing[k] * input_scale), the input scale 1 per token.
// What every int8 GEMM (the CPU's, the GPU's) computes it from.
inline std::vector<float> Int8InputMultipliers(const QuantizedLinear& q) {
  const float input_scale = q.input_scale == 0.0f ? 1.0f : q.input_scale;
  std::vector<float> m(static_cast<size_t>(q.smoothing.numel()));
  for (size_t k = 0; k < m.size(); ++k) m[k] = 1.0f / input_scale / q.smoothing.f32()[k];
  return m;
}

// Each output's sum of its int8 weights: a zero point z contributes
// z * sum to that output's integer product, which the GEMM takes out.
inline std::vector<int32_t> Int8WeightSums(const QuantizedLinear& q) {
  const int64_t out = q.weights.dim(0), in = q.weights.dim(1);
  const auto* w = static_cast<const int8_t*>(q.weights.raw());
  std::vector<int32_t> sums(static_cast<size_t>(out), 0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < in; ++k) sums[o] += w[o * in + k];
  return sums;
}

struct QuantizedWeights {
  QuantFormat format = QuantFormat::kInt8;
  // The quantized Linears by their weight's plan section name
  // ("layers.3.qkv_w"); encoder Linears not here (put back to fp32 to meet
  // the accuracy budget) and the heads use the model's fp32 weights.
  std::map<std::string, QuantizedLinear> linears;
  QuantizationReport report;  // measured when quantized, against fp32
  // Sample inputs and what the engine that quantized the model answered on
  // them (every output a run returns unasked). An engine made from these
  // weights must answer the same (serving's engine factory checks), else the
  // report does not describe it: a CPU whose int8 kernels saturate or round
  // otherwise than the one that built the plan, or a GPU whose FP8 GEMMs
  // stray from the arithmetic they were measured in.
  RaggedBatch check_batch;
  BatchOutputs check_outputs;
  // What the fp32 model answers on check_batch (empty in int8 plans from
  // before 2026-12-06). A GPU rounds its fp16 activations onto E4M3 or the
  // int8 grid where the CPU rounded fp32 ones: a fraction of the roundings
  // land on the other neighbour, so the two part by up to the 8-bit error
  // itself, not by a rounding of the output. The check then asks that the
  // GPU's answers be as close to these as the quantizing engine's.
  BatchOutputs check_reference;
};

// The 8-bit form of the Linear whose weight is plan section `weight`, when
// `quantized` (null: not an 8-bit model) holds one; else null.
inline const QuantizedLinear* FindQuantizedLinear(const QuantizedWeights* quantized,
                                                  const std::string& weight) {
  if (!quantized) return nullptr;
  auto it = quantized->linears.find(weight);
  return it == quantized->linears.end() ? nullptr : &it->second;
}

// A copy of `model` whose encoder Linears are 8-bit (Model::quantized; their
// fp32 weights dropped), quantized as an 8-bit CPU engine does
// (CpuEngineOptions::quantize: calibration, the report, the fallback to fp32
// until the budget holds; fp8 emulated) on `threads` CPU threads (0: all
// cores), with what that engine answers on `check_batch` as its check, and
// what the fp32 model answers (check_reference).
StatusOr<std::shared_ptr<const Model>> QuantizeTo8Bits(std::shared_ptr<const Model> model,
                                                      const QuantizeOptions& options, int threads,
                                                      RaggedBatch check_batch);

}  // namespace bertrt

// A model whose encoder Linears are quantized to int8 once, as an int8 plan
// stores them (`bertrt build --precision int8`): the 8-bit weights and their
// scales, the accuracy report measured when they were made, and the check an
// engine made from them passes at load.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "bertrt/engine.h"
#include "bertrt/tensor.h"

namespace bertrt {

// One Linear's int8 GEMM operands (the CPU engine's Int8Gemm): y = scales[o] *
// (q(x / smoothing) . weights[o]) + bias[o], with the bias and the epilogue
// the Linear's own.
struct Int8Linear {
  // [out, in] I8, in [-127, 127]: w[o][i] * smoothing[i] / scales[o], rounded.
  Tensor weights;
  Tensor scales;     // [out] F32, > 0: each output row's quantization step
  Tensor smoothing;  // [in] F32, > 0: SmoothQuant's divisor per input column (ones: none)
  // The input's step per tensor (a calibrated |x| bound / 127); 0: each row
  // takes its own range (per token, uint8 with a zero point).
  float input_scale = 0.0f;
};

struct Int8Weights {
  // The quantized Linears by their weight's plan section name
  // ("layers.3.qkv_w"); encoder Linears not here (put back to fp32 to meet
  // the accuracy budget) and the heads use the model's fp32 weights.
  std::map<std::string, Int8Linear> linears;
  QuantizationReport report;  // measured when quantized, against fp32
  // Sample inputs and what the engine that quantized the model answered on
  // them (every output a run returns unasked). An engine made from these
  // weights must answer the same (serving's engine factory checks), else the
  // report does not describe it: a CPU whose int8 kernels saturate or round
  // otherwise than the one that built the plan.
  RaggedBatch check_batch;
  BatchOutputs check_outputs;
};

// The int8 form of the Linear whose weight is plan section `weight`, when
// `int8` (null: not an int8 model) holds one; else null.
inline const Int8Linear* FindInt8Linear(const Int8Weights* int8, const std::string& weight) {
  if (!int8) return nullptr;
  auto it = int8->linears.find(weight);
  return it == int8->linears.end() ? nullptr : &it->second;
}

// A copy of `model` whose encoder Linears are int8 (Model::int8; their fp32
// weights dropped), quantized as an int8 CPU engine does
// (CpuEngineOptions::int8: calibration, the report, the fallback to fp32
// until the budget holds) on `threads` CPU threads (0: all cores), with what
// that engine answers on `check_batch` as its check.
StatusOr<std::shared_ptr<const Model>> QuantizeToInt8(std::shared_ptr<const Model> model,
                                                      const Int8Options& options, int threads,
                                                      RaggedBatch check_batch);

}  // namespace bertrt

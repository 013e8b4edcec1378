// Engines from a typed placement: which device, GPU, precision, threads and
// GELU one engine instance runs with. The server makes every instance of a
// model through it; `bertrt run`, `build` and `bench` through it too, from
// their command lines (tools/cli_util.h turns the flags into an InstanceSpec).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "bertrt/cuda_engine.h"
#include "bertrt/engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"
#include "serving/calibration.h"

namespace bertrt::serving {

struct InstanceSpec {
  std::string device = "cpu";  // "cpu" | "cuda"
  int gpu = 0;                 // for "cuda"
  std::string precision;       // fp32 | fp16 | bf16 | int8 (cpu); empty: the device's default
  int threads = 0;             // for "cpu"; 0: all cores
  std::string gelu = "exact";  // for "cuda": exact | tanh (CudaEngineOptions::approximate_erf_gelu)
  CalibrationSpec calibration;  // for int8
  // "cpu" or "cuda:N", as logs and metrics name it.
  std::string Name() const { return device == "cuda" ? "cuda:" + std::to_string(gpu) : device; }
};

using NoticeFn = std::function<void(const std::string&)>;

// `precision`, or the device's default when empty: fp32 on the CPU, fp16 on CUDA.
std::string ResolvePrecision(const std::string& device, const std::string& precision);

// The CUDA engine options `spec` asks for, with the optimizations each
// BERTRT_* comparison switch turns off (README).
StatusOr<CudaEngineOptions> CudaOptions(const InstanceSpec& spec, NoticeFn on_notice);

// `model` with its encoder Linears quantized to int8 (QuantizeToInt8),
// calibrated on spec.calibration's texts tokenized by `tokenizer`, checked
// on the built-in verification samples; `model` itself when already int8.
StatusOr<std::shared_ptr<const Model>> QuantizeModel(std::shared_ptr<const Model> model,
                                                     const Tokenizer& tokenizer,
                                                     const InstanceSpec& spec,
                                                     const NoticeFn& on_notice);

// A CPU engine (fp32; int8 for an int8 model, or quantized by QuantizeModel
// first for spec.precision int8, then held to the model's check by
// CheckInt8Reproduced; fp16/bf16 are refused with what to use instead) or a
// CUDA engine on spec.gpu. An int8 engine's accuracy report goes to
// `on_notice`.
StatusOr<std::unique_ptr<Engine>> CreateEngine(std::shared_ptr<const Model> model,
                                               const Tokenizer& tokenizer,
                                               const InstanceSpec& spec, NoticeFn on_notice);

}  // namespace bertrt::serving

// Engines from a typed placement: which device, GPU, precision, threads and
// GELU one engine instance runs with. The server makes every instance of a
// model through it; `bertrt run`, `build` and `bench` through it too, from
// their command lines (tools/cli_util.h turns the flags into an InstanceSpec).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "bertrt/engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"
#include "serving/calibration.h"

namespace bertrt::serving {

struct InstanceSpec {
  std::string device = "cpu";  // "cpu" | "cuda"
  int gpu = 0;                 // for "cuda"
  // fp32 | fp16 | bf16 | int8 (cpu) | fp8; empty: the device's default
  std::string precision;
  int threads = 0;             // for "cpu"; 0: all cores
  std::string gelu = "exact";  // for "cuda": exact | tanh (CudaEngineOptions::approximate_erf_gelu)
  CalibrationSpec calibration;  // for int8 and fp8
  // For "cuda": the engine times each operation of its forwards
  // (CudaEngineOptions::profile; `bench --profile`), never for serving.
  bool profile = false;
  // "cpu" or "cuda:N", as logs and metrics name it.
  std::string Name() const { return device == "cuda" ? "cuda:" + std::to_string(gpu) : device; }
};

using NoticeFn = std::function<void(const std::string&)>;

// `precision`, or the device's default when empty: fp32 on the CPU, fp16 on CUDA.
std::string ResolvePrecision(const std::string& device, const std::string& precision);

// The 8-bit format an instance runs in: its model's (an 8-bit plan's), or
// spec.precision's ("int8" | "fp8"); none: a float precision.
std::optional<QuantFormat> QuantizedFormat(const Model& model, const InstanceSpec& spec);
// The precision an instance of `model` runs in, as /info, Triton's config
// and `bench` name it: an 8-bit model's format whatever the device's default
// said; else spec's, or the device's default.
std::string EffectivePrecision(const Model& model, const InstanceSpec& spec);

// `model` with its encoder Linears quantized to spec.precision's 8-bit format
// (QuantizeTo8Bits, on the CPU), calibrated on spec.calibration's texts
// tokenized by `tokenizer`, checked on the built-in verification samples;
// `model` itself when already 8-bit.
StatusOr<std::shared_ptr<const Model>> QuantizeModel(std::shared_ptr<const Model> model,
                                                     const Tokenizer& tokenizer,
                                                     const InstanceSpec& spec,
                                                     const NoticeFn& on_notice);

// A CPU engine (fp32 or bf16; fp16 is refused with what to use instead) or
// a CUDA engine on spec.gpu. 8-bit (an 8-bit model, or spec.precision int8
// or fp8): the model quantized by QuantizeModel first unless it is, int8 on
// the CPU, fp8 on the GPU (emulated on the CPU), the engine held to the
// model's check by CheckQuantizedReproduced, its accuracy report sent to
// `on_notice`.
StatusOr<std::unique_ptr<Engine>> CreateEngine(std::shared_ptr<const Model> model,
                                               const Tokenizer& tokenizer,
                                               const InstanceSpec& spec, NoticeFn on_notice);

}  // namespace bertrt::serving

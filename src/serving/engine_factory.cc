#include "serving/engine_factory.h"

#include <optional>

#include "bertrt/cuda_engine.h"
#include "bertrt/quantized_weights.h"
#include "bertrt/self_check.h"

namespace bertrt::serving {

std::string ResolvePrecision(const std::string& device, const std::string& precision) {
  if (!precision.empty()) return precision;
  return device == "cuda" ? "fp16" : "fp32";
}

std::optional<QuantFormat> QuantizedFormat(const Model& model, const InstanceSpec& spec) {
  if (model.quantized) return model.quantized->format;
  if (spec.precision == "int8") return QuantFormat::kInt8;
  if (spec.precision == "fp8") return QuantFormat::kFp8;
  return std::nullopt;
}

std::string EffectivePrecision(const Model& model, const InstanceSpec& spec) {
  if (auto format = QuantizedFormat(model, spec)) return QuantFormatName(*format);
  return ResolvePrecision(spec.device, spec.precision);
}

StatusOr<std::shared_ptr<const Model>> QuantizeModel(std::shared_ptr<const Model> model,
                                                     const Tokenizer& tokenizer,
                                                     const InstanceSpec& spec,
                                                     const NoticeFn& on_notice) {
  if (model->quantized) return model;
  const std::optional<QuantFormat> format = QuantizedFormat(*model, spec);
  if (!format) return InvalidArgument("--precision " + spec.precision + " is not 8 bits");
  const std::string name = QuantFormatName(*format);
  if (spec.calibration.texts.empty() && on_notice)
    on_notice(name + ": calibrating on bertrt's built-in corpus of " +
              std::to_string(BuiltInCalibrationTexts().size()) +
              " short multilingual texts; for the best accuracy give inputs like your own "
              "with --calibrate FILE (JSON Lines or one text per line)");
  ASSIGN_OR_RETURN(const QuantizeOptions options,
                   MakeQuantizeOptions(*format, spec.calibration, tokenizer, model->config));
  ASSIGN_OR_RETURN(RaggedBatch check, EncodeSamples(tokenizer, BuiltInVerifySamples(),
                                                    model->config.max_seq_length));
  return QuantizeTo8Bits(std::move(model), options, spec.threads, std::move(check));
}

namespace {

// The CUDA engine options `spec` asks for.
StatusOr<CudaEngineOptions> CudaOptions(const InstanceSpec& spec, NoticeFn on_notice) {
  CudaEngineOptions options;
  options.device = spec.gpu;
  // 8-bit engines compute the rest in fp16.
  ASSIGN_OR_RETURN(options.precision,
                   ParsePrecision(spec.precision == "fp8" || spec.precision == "int8"
                                      ? "fp16"
                                      : ResolvePrecision("cuda", spec.precision)));
  options.approximate_erf_gelu = spec.gelu == "tanh";
  options.profile = spec.profile;
  options.on_notice = std::move(on_notice);
  return options;
}

// An engine whose encoder Linears run in 8 bits: int8 on the CPU or on
// Hopper's integer tensor cores; fp8 on the GPU's tensor cores, or
// emulated on the CPU. The model is quantized
// here (on the CPU) unless it is an 8-bit plan, and the engine is held to
// the model's check.
StatusOr<std::unique_ptr<Engine>> CreateQuantizedEngine(std::shared_ptr<const Model> model,
                                                        const Tokenizer& tokenizer,
                                                        const InstanceSpec& spec,
                                                        QuantFormat format,
                                                        const NoticeFn& on_notice) {
  const std::string name = QuantFormatName(format);
  const bool from_plan = model->quantized != nullptr;
  const std::string plan = from_plan ? model->source + " is an " + name + " plan: " : "";
  // An 8-bit plan's quantized Linears have no fp32 weights: it runs as built
  // (the device's default precision is not a request).
  if (spec.precision != name && spec.precision != ResolvePrecision(spec.device, "") &&
      !spec.precision.empty())
    return InvalidArgument(plan + "--precision " + spec.precision +
                           " cannot apply to it; build a plan in that precision");
  ASSIGN_OR_RETURN(model, QuantizeModel(std::move(model), tokenizer, spec, on_notice));
  std::unique_ptr<Engine> engine;
  if (spec.device == "cuda") {
    ASSIGN_OR_RETURN(CudaEngineOptions options, CudaOptions(spec, on_notice));
    auto made = CreateCudaEngine(model, options);
    if (!made.ok())
      return Status(made.status().code(), "--device cuda: " + made.status().message());
    engine = std::move(made).value();
  } else {
    if (format == QuantFormat::kFp8 && on_notice)
      on_notice("fp8 on the CPU is emulated (each GEMM operand rounded to E4M3, fp32 "
                "arithmetic): slower than fp32, for checking what the GPU's FP8 tensor cores "
                "will answer; serve fp8 with --device cuda");
    CpuEngineOptions options;
    options.threads = spec.threads;
    options.on_notice = on_notice;
    ASSIGN_OR_RETURN(engine, CreateCpuEngine(model, options));
  }
  ASSIGN_OR_RETURN(const QuantizedCheck check, CheckQuantizedReproduced(*model, *engine));
  if (on_notice) {
    on_notice(model->quantized->report.Summary());
    if (from_plan || spec.device == "cuda")
      on_notice(name + " check: " + check.Describe());
  }
  return engine;
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> CreateEngine(std::shared_ptr<const Model> model,
                                               const Tokenizer& tokenizer,
                                               const InstanceSpec& spec, NoticeFn on_notice) {
  if (const std::optional<QuantFormat> format = QuantizedFormat(*model, spec))
    return CreateQuantizedEngine(std::move(model), tokenizer, spec, *format, on_notice);
  ASSIGN_OR_RETURN(const Precision precision,
                   ParsePrecision(ResolvePrecision(spec.device, spec.precision)));
  if (spec.device == "cpu") {
    if (precision == Precision::kFp16)
      return InvalidArgument(
          "--precision fp16: the CPU engine runs fp32, bf16, int8 or fp8 (emulated); use "
          "--device cuda for fp16");
    CpuEngineOptions options;
    options.threads = spec.threads;
    options.on_notice = std::move(on_notice);
    options.bf16 = precision == Precision::kBf16;
    return CreateCpuEngine(std::move(model), options);
  }
  if (spec.device == "cuda") {
    ASSIGN_OR_RETURN(CudaEngineOptions options, CudaOptions(spec, std::move(on_notice)));
    auto engine = CreateCudaEngine(std::move(model), options);
    if (!engine.ok())
      return Status(engine.status().code(), "--device cuda: " + engine.status().message());
    return engine;
  }
  return InvalidArgument("--device " + spec.device + ": expected cpu or cuda");
}

}  // namespace bertrt::serving

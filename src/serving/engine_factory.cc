#include "serving/engine_factory.h"

#include <cstdlib>

#include "bertrt/int8_weights.h"
#include "bertrt/self_check.h"

namespace bertrt::serving {
namespace {

// Whether environment variable `name` is set to `value`.
bool EnvIs(const char* name, const char* value) {
  const char* set = std::getenv(name);
  return set && std::string(set) == value;
}

}  // namespace

std::string ResolvePrecision(const std::string& device, const std::string& precision) {
  if (!precision.empty()) return precision;
  return device == "cuda" ? "fp16" : "fp32";
}

StatusOr<CudaEngineOptions> CudaOptions(const InstanceSpec& spec, NoticeFn on_notice) {
  CudaEngineOptions options;
  options.device = spec.gpu;
  ASSIGN_OR_RETURN(options.precision, ParsePrecision(ResolvePrecision("cuda", spec.precision)));
  options.approximate_erf_gelu = spec.gelu == "tanh";
  // Timing at first use for every model, not only for plans without this
  // GPU's choices: for comparisons against cuBLASLt's heuristic.
  options.time_gemms = EnvIs("BERTRT_GEMM_TUNING", "1");
  // Optimizations on by default, each off with its variable at 0 (README).
  options.cuda_graphs = !EnvIs("BERTRT_CUDA_GRAPHS", "0");
  options.overlap_kernel_launches = !EnvIs("BERTRT_PDL", "0");
  options.splitk_gemms = !EnvIs("BERTRT_SPLITK_GEMM", "0");
  options.fused_gelu_gemm = !EnvIs("BERTRT_FUSED_GELU_GEMM", "0");
  options.tma_attention = !EnvIs("BERTRT_TMA_ATTENTION", "0");
  options.attention_windows = !EnvIs("BERTRT_ATTENTION_WINDOWS", "0");
  options.first_query_attention = !EnvIs("BERTRT_FIRST_QUERY_ATTENTION", "0");
  options.on_notice = std::move(on_notice);
  return options;
}

StatusOr<std::shared_ptr<const Model>> QuantizeModel(std::shared_ptr<const Model> model,
                                                     const Tokenizer& tokenizer,
                                                     const InstanceSpec& spec,
                                                     const NoticeFn& on_notice) {
  if (model->int8) return model;
  if (spec.calibration.texts.empty() && on_notice)
    on_notice("int8: calibrating on bertrt's built-in corpus of " +
              std::to_string(BuiltInCalibrationTexts().size()) +
              " short multilingual texts; for the best accuracy give inputs like your own "
              "with --calibrate FILE (JSON Lines or one text per line)");
  ASSIGN_OR_RETURN(const Int8Options options,
                   MakeInt8Options(spec.calibration, tokenizer, model->config));
  ASSIGN_OR_RETURN(RaggedBatch check, EncodeSamples(tokenizer, BuiltInVerifySamples(),
                                                    model->config.max_seq_length));
  return QuantizeToInt8(std::move(model), options, spec.threads, std::move(check));
}

StatusOr<std::unique_ptr<Engine>> CreateEngine(std::shared_ptr<const Model> model,
                                               const Tokenizer& tokenizer,
                                               const InstanceSpec& spec, NoticeFn on_notice) {
  if (spec.precision == "int8" || model->int8) {
    const bool from_plan = model->int8 != nullptr;
    const std::string plan = from_plan ? model->source + " is an int8 plan: " : "";
    if (spec.device != "cpu")
      return Unimplemented(plan +
                           "int8 runs on the CPU engine for now (--device cpu); on --device cuda "
                           "use fp16 or bf16");
    // An int8 plan's quantized Linears have no fp32 weights: it runs as built
    // (fp32 is the CPU's default precision, not a request).
    if (spec.precision != "int8" && spec.precision != "fp32" && !spec.precision.empty())
      return InvalidArgument(plan + "--precision " + spec.precision +
                             " cannot apply to it; build a plan in that precision");
    ASSIGN_OR_RETURN(model, QuantizeModel(std::move(model), tokenizer, spec, on_notice));
    CpuEngineOptions options;
    options.threads = spec.threads;
    options.on_notice = on_notice;
    ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, CreateCpuEngine(model, options));
    ASSIGN_OR_RETURN(const VerifyReport check, CheckInt8Reproduced(*model, *engine));
    if (on_notice) {
      on_notice(model->int8->report.Summary());
      if (from_plan)
        on_notice("int8 check: the answers of the machine that built the plan reproduced (" +
                  DescribeReport(check) + ")");
    }
    return engine;
  }
  ASSIGN_OR_RETURN(const Precision precision,
                   ParsePrecision(ResolvePrecision(spec.device, spec.precision)));
  if (spec.device == "cpu") {
    if (precision == Precision::kFp16)
      return InvalidArgument(
          "--precision fp16: the CPU engine runs fp32, bf16 or int8; use --device cuda for fp16");
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

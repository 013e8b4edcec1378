// `bertrt build MODEL_DIR -o model.plan`: one self-contained plan file per
// model, verified against the fp32 reference before it is kept.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "bertrt/cuda_engine.h"
#include "bertrt/devices.h"
#include "bertrt/plan.h"
#include "bertrt/quantized_weights.h"
#include "bertrt/self_check.h"
#include "cli_util.h"
#include "commands.h"

namespace bertrt::cli {
namespace {

struct BuildFlags {
  std::string model;
  ImportFlags import;
  std::string output;
  std::string precision;  // empty: fp32 for cpu, fp16 for cuda
  std::string device = "cpu";
  serving::CalibrationSpec calibration;  // for int8 and fp8
  std::string samples;
  int max_seq_len = 0;
  int max_batch_tokens = 0;
  int threads = 0;
  bool force = false;
  bool skip_verify = false;
};

class Stages {
 public:
  void Begin(const char* name) {
    name_ = name;
    start_ = Now();
    std::fprintf(stderr, "[build] %s...\n", name);
  }
  void End(const std::string& detail = "") {
    std::fprintf(stderr, "[build] %s done in %.2f s%s%s\n", name_, Now() - start_,
                 detail.empty() ? "" : ": ", detail.c_str());
  }
  double Total() const { return Now() - t0_; }

 private:
  static double Now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
  }
  const char* name_ = "";
  double start_ = Now();
  double t0_ = Now();
};

// Batches up to this many tokens get timed GEMMs when the plan sets no
// --max-batch-tokens: 128 sequences of 128 tokens.
constexpr int kDefaultTimedTokens = 16384;

// The tune stage: times the GEMMs of every batch size a CUDA engine runs up
// to the plan's batch limit, for the plan's tuning cache. A failure (a GPU
// too small for the largest batch, say) leaves the cache empty; engines then
// take cuBLASLt's heuristic choices, as for a plan built without a GPU.
std::vector<GemmChoice> TuneGemms(const ModelConfig& config, Precision precision,
                                  int max_batch_tokens, Stages& stages) {
  stages.Begin("tune");
  const int max_tokens = max_batch_tokens > 0 ? max_batch_tokens : kDefaultTimedTokens;
  CudaEngineOptions options;  // as `serve` runs the plan by default
  options.precision = precision;
  std::unique_ptr<ProgressBar> progress;
  int batch_sizes = 0;
  auto choices = TimeGemms(config, options, max_tokens, [&](int done, int total) {
    if (!progress) progress = std::make_unique<ProgressBar>("tune", total);
    progress->Advance();
    batch_sizes = done;
  });
  progress.reset();
  if (!choices.ok()) {
    PrintNotice(
        "GEMM timing failed (" + choices.status().message() +
        "): the plan stores no GEMM choices, so CUDA engines take cuBLASLt's heuristic ones");
    stages.End();
    return {};
  }
  stages.End(std::to_string(choices->size()) + " GEMM choices over " + std::to_string(batch_sizes) +
             " batch sizes up to " + std::to_string(max_tokens) + " tokens");
  return std::move(choices).value();
}

// An 8-bit plan against fp32 on the samples, held to the plan's accuracy
// budget: embeddings' min cosine, argmax agreement (near ties aside).
Status CheckQuantizedVerifyThresholds(const VerifyReport& r, const AccuracyBudget& budget) {
  if (!(r.min_cosine_vectors >= budget.cosine_min))
    return FailedPrecondition("min cosine " + std::to_string(r.min_cosine_vectors) +
                              " is below the budget's " + std::to_string(budget.cosine_min));
  if (r.argmax_total > 0 && !(double(r.argmax_equal) / r.argmax_total >= budget.argmax))
    return FailedPrecondition("argmax agrees on " + std::to_string(r.argmax_equal) + " of " +
                              std::to_string(r.argmax_total) + " rows, below the budget's " +
                              std::to_string(budget.argmax));
  return Status::Ok();
}

// Runs the built plan and the HF directory's fp32 model on the samples.
// Returns the exit code; prints the comparison on stdout.
int Verify(const BuildFlags& flags, const Plan& plan, std::shared_ptr<const Model> reference,
           Precision precision, bool on_gpu) {
  const QuantizedWeights* quantized = plan.model->quantized.get();
  const std::string weights =
      quantized ? QuantFormatName(quantized->format) : PrecisionName(precision);
  std::vector<VerifySample> samples = BuiltInVerifySamples();
  if (!flags.samples.empty()) {
    auto read = ReadVerifySamples(flags.samples);
    if (!read.ok()) return Fail(read.status(), kExitUsage);
    samples = std::move(read).value();
  }
  EngineFlags ref_flags;
  ref_flags.threads = flags.threads;
  auto ref_engine = CreateEngine(reference, *plan.tokenizer, ref_flags);
  if (!ref_engine.ok()) return Fail(ref_engine.status(), EngineFailureCode(ref_engine.status().code()));
  // The plan runs as serve runs it by default.
  EngineFlags plan_flags = ref_flags;
  plan_flags.device = on_gpu ? "cuda" : "cpu";
  plan_flags.precision = quantized ? weights : on_gpu ? PrecisionName(precision) : "fp32";
  // The quantize stage printed the 8-bit report already; the load's other
  // notices (its check) still show.
  const std::string printed = quantized ? quantized->report.Summary() : "";
  auto plan_engine = serving::CreateEngine(plan.model, *plan.tokenizer, Instance(plan_flags),
                                           [&](const std::string& notice) {
                                             if (notice != printed) PrintNotice(notice);
                                           });
  if (!plan_engine.ok())
    return Fail(plan_engine.status(), EngineFailureCode(plan_engine.status().code()));
  auto report = CompareEngines(DescribeOutputs(*reference), **ref_engine, **plan_engine,
                               *plan.tokenizer, samples, plan.model->config.max_seq_length);
  if (!report.ok()) return Fail(report.status(), kExitRuntimeError);
  const VerifyReport& r = *report;
  std::printf("verify: %d samples, %s on %s (%s weights) vs fp32 reference on cpu\n", r.samples,
              r.output_name.c_str(), (*plan_engine)->device().c_str(), weights.c_str());
  std::printf("  max abs diff %.3g  mean abs diff %.3g  min cosine %.6f", r.max_abs_diff,
              r.mean_abs_diff, r.min_cosine);
  if (r.argmax_total > 0) std::printf("  argmax agreement %d/%d", r.argmax_equal, r.argmax_total);
  std::printf("\n");
  Status within = quantized ? CheckQuantizedVerifyThresholds(r, quantized->report.budget)
                            : CheckVerifyThresholds(r, precision);
  if (within.ok()) return kExitOk;
  if (flags.force) {
    std::fprintf(stderr, "warning: verification failed (%s); plan kept because of --force\n",
                 within.message().c_str());
    return kExitOk;
  }
  std::error_code ec;
  std::filesystem::remove(flags.output, ec);
  return Fail(Status(within.code(), "verification failed: " + within.message() + "; " +
                                        flags.output + " removed (use --force to keep it)"),
              kExitVerifyFailed);
}

// The quantize stage of an 8-bit build: the model's encoder Linears in int8
// or fp8 (quantized and measured on this machine's CPU: fp8 emulated),
// calibrated on --calibrate's texts, those that cost the budget back in fp32;
// its report printed on stdout. Null (after the failure is printed) when it
// fails.
std::shared_ptr<const Model> Quantize(const BuildFlags& flags, std::shared_ptr<const Model> model,
                                      const Tokenizer& tokenizer, Stages& stages, int* code) {
  stages.Begin("quantize");
  serving::InstanceSpec spec;
  spec.precision = flags.precision;
  spec.threads = flags.threads;
  spec.calibration = flags.calibration;
  auto quantized = serving::QuantizeModel(std::move(model), tokenizer, spec, PrintNotice);
  const std::string& format = flags.precision;
  if (!quantized.ok()) {
    *code = Fail(quantized.status(), quantized.status().code() == StatusCode::kInvalidArgument
                                         ? kExitUsage
                                         : kExitRuntimeError);
    return nullptr;
  }
  const QuantizationReport& report = (*quantized)->quantized->report;
  std::printf("quantize: %s\n", report.Summary().c_str());
  if (report.quantized_linears == 0)
    PrintNotice("no Linear stays in " + format +
                " within the accuracy budget: the plan computes as fp32 does (a looser "
                "--accuracy-budget, or calibration texts like your inputs, keep some in " +
                format + ")");
  stages.End();
  return std::move(quantized).value();
}

int Build(const BuildFlags& flags) {
  const bool eight_bit = flags.precision == "int8" || flags.precision == "fp8";
  // An 8-bit plan's other weights are fp32's (a GPU engine narrows them).
  auto precision =
      ParsePrecision(eight_bit ? "fp32" : ResolvePrecision(flags.device, flags.precision));
  if (!precision.ok()) return Fail(precision.status(), kExitUsage);
  if (!PlanPath(flags.model).empty())
    return Fail(InvalidArgument(flags.model + " is already a plan; build from the Hugging Face "
                                              "directory it came from"),
                kExitUsage);
  Stages stages;
  stages.Begin("load");
  auto loaded = LoadForCli(flags.model, flags.import);
  if (!loaded.ok()) return Fail(loaded.status(), kExitModelError);
  // A shallow copy: the tensors stay views of the checkpoint.
  auto model = std::make_shared<Model>(*loaded->model);
  const int max_positions = model->config.max_positions();
  if (flags.max_seq_len > max_positions)
    return Fail(InvalidArgument("--max-seq-len " + std::to_string(flags.max_seq_len) +
                                " is more than the model's " + std::to_string(max_positions) +
                                " position embeddings"),
                kExitUsage);
  if (flags.max_seq_len > 0) model->config.max_seq_length = flags.max_seq_len;
  stages.End(model->config.architecture + ", " + std::to_string(model->ParameterCount()) +
             " parameters");

  stages.Begin("convert");
  PlanBuildOptions options;
  options.precision = *precision;
  options.device = flags.device;
  options.max_seq_len = model->config.max_seq_length;
  options.max_batch_tokens = flags.max_batch_tokens;
  bool on_gpu = false;
  if (flags.device == "cuda") {
    auto gpus = ListGpus();
    if (gpus.ok()) {
      options.gpu = (*gpus)[0];
      on_gpu = true;
    } else {
      PrintNotice("--device cuda without a usable GPU (" + gpus.status().message() +
                  "): the plan is written for CUDA and verified on the CPU; it holds no timed GEMM "
                  "choices, so CUDA engines take cuBLASLt's heuristic ones");
    }
  }
  auto tokenizer = ReadTokenizerSource(loaded->tokenizer_dir);
  if (!tokenizer.ok()) return Fail(tokenizer.status(), kExitModelError);
  auto checksum = SourceChecksum(model->weights_files);
  if (!checksum.ok()) return Fail(checksum.status(), kExitModelError);
  stages.End(*checksum + ", tokenizer from " + tokenizer->kind);
  // (An fp8 plan's GEMMs take cuBLASLt's heuristic: the tuning times fp16's.)
  if (on_gpu && !eight_bit)
    options.gemm_choices = TuneGemms(model->config, *precision, flags.max_batch_tokens, stages);
  // The fp32 model stays the verification's reference.
  std::shared_ptr<const Model> stored = model;
  if (eight_bit) {
    int code = kExitOk;
    stored = Quantize(flags, model, *loaded->tokenizer, stages, &code);
    if (!stored) return code;
  }

  stages.Begin("write");
  Status written = WritePlan(*stored, *tokenizer, options, *checksum, flags.output);
  if (!written.ok()) return Fail(written, kExitUnavailable);
  std::error_code ec;
  const auto size = std::filesystem::file_size(flags.output, ec);
  char mib[32];
  std::snprintf(mib, sizeof(mib), "%.1f MiB", static_cast<double>(size) / (1 << 20));
  stages.End(flags.output + " (" + mib + ", " +
             (eight_bit ? flags.precision : PrecisionName(*precision)) +
             " weights, for " + flags.device + ")");

  int code = kExitOk;
  if (flags.skip_verify) {
    PrintNotice("--skip-verify: the plan was not checked against the reference");
  } else {
    stages.Begin("verify");
    auto plan = ReadPlan(flags.output);
    if (!plan.ok()) return Fail(plan.status(), kExitModelError);
    code = Verify(flags, *plan, model, *precision, on_gpu);
    stages.End();
  }
  std::fprintf(stderr, "[build] %s in %.2f s\n", code == kExitOk ? "built" : "failed",
               stages.Total());
  return code;
}

}  // namespace

void RegisterBuildCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<BuildFlags>();
  CLI::App* cmd = app.add_subcommand(
      "build",
      "Build one self-contained plan file from a model directory (or a .onnx file or "
      "TensorFlow checkpoint in one): config, head, "
      "labels, tokenizer and weights laid out for direct use (read once at load, no conversion). The plan runs on "
      "the CPU and on any supported GPU; `run`, `tokenize`, `inspect` and `bench` take it in "
      "place of the directory. The build ends by running the plan on sample texts against the "
      "fp32 reference and fails above the thresholds (fp32: max abs diff 1e-4 relative; "
      "fp16/bf16: cosine 0.999 and every argmax equal; int8/fp8: its accuracy budget's min "
      "cosine and argmax agreement) unless --force.");
  cmd->add_option("MODEL", flags->model, kModelHelp)->required();
  AddImportOptions(cmd, &flags->import);
  cmd->add_option("-o,--output", flags->output, "The plan file to write")->required();
  cmd->add_option("--precision", flags->precision,
                  "Weight precision: fp32, fp16 or bf16 (default: fp32 for cpu, fp16 for cuda); "
                  "int8 (CPU, or Hopper GPUs) or fp8 (FP8 E4M3, GPUs from sm_89): the encoder's "
                  "GEMM weights in 8 "
                  "bits, calibrated on --calibrate's texts (default: a built-in multilingual "
                  "corpus) on this machine's CPU (fp8 emulated), Linears put back to fp32 "
                  "until --accuracy-budget holds; the plan stores the 8-bit weights, their "
                  "scales and the accuracy report (`bertrt inspect` shows it), and an engine "
                  "loading it must reproduce this machine's answers")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "int8", "fp8"}));
  AddCalibrationOptions(cmd, &flags->calibration, "With --precision int8 or fp8");
  cmd->add_option("--device", flags->device,
                  "Backend the plan is laid out for: cpu or cuda (it serves on both); cuda also "
                  "times the GEMMs on GPU 0 and stores the fastest cuBLASLt algorithms in the "
                  "plan, for engines on the same GPU model and cuBLASLt")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--max-seq-len", flags->max_seq_len,
                  "Longest input served (default: the model's limit)")
      ->check(CLI::PositiveNumber);
  cmd->add_option(
         "--max-batch-tokens", flags->max_batch_tokens,
         "Largest batch in tokens: what a GPU engine reserves memory for at start, the "
         "server's batch token budget, and with --device cuda the largest batch whose GEMMs "
         "are timed into the plan (default: no limit; GEMMs timed up to 16384 tokens)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--samples", flags->samples,
                  "JSON Lines of {\"text\": ..., \"text_pair\": ...} to verify on (default: "
                  "built-in multilingual samples)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--force", flags->force,
                "Keep the plan even when verification fails");
  cmd->add_flag("--skip-verify", flags->skip_verify, "Do not verify the plan");
  cmd->add_option("--threads", flags->threads, "CPU threads for verification (0: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([flags, &exit_code] { exit_code = Build(*flags); });
}

}  // namespace bertrt::cli

#include "cli_util.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "bertrt/cuda_engine.h"
#include "bertrt/devices.h"
#include "bertrt/self_check.h"
#include "server/common/triton_config.h"

namespace bertrt::cli {

void PrintNotice(const std::string& notice) {
  std::fprintf(stderr, "notice: %s\n", notice.c_str());
}

void AddImportOptions(CLI::App* cmd, ImportFlags* flags) {
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "Directory whose tokenizer (tokenizer.json, or vocab.txt + "
                  "tokenizer_config.json) to use: for a model folder without one (a bare "
                  ".onnx file, a checkpoint without its vocab.txt)");
  cmd->add_option("--labels", flags->labels,
                  "The classifier's class names in order, replacing config.json's (a TensorFlow "
                  "checkpoint has none): a file with one per line, or a comma-separated list");
}

ImportOptions MakeImportOptions(const ImportFlags& flags) {
  ImportOptions options;
  options.on_notice = PrintNotice;
  options.tokenizer_dir = flags.tokenizer;
  options.labels = flags.labels;
  return options;
}

StatusOr<LoadedModel> LoadForCli(const std::string& path, const ImportFlags& flags,
                                 bool print_notices) {
  ImportOptions options = MakeImportOptions(flags);
  if (!print_notices) options.on_notice = nullptr;
  return LoadModelAndTokenizer(path, options);
}

void AddEngineOptions(CLI::App* cmd, EngineFlags* flags, const std::string& threads_help) {
  cmd->add_option("--device", flags->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--precision", flags->precision,
                  "fp32, fp16 or bf16 (default: fp32 on cpu, fp16 on cuda; bf16 on cpu: the "
                  "encoder's GEMMs in bf16 on AVX512_BF16, the rest fp32); int8 on cpu: the "
                  "encoder's GEMMs in int8 (VNNI); fp8: the encoder's GEMMs in FP8 E4M3 on "
                  "the GPU's tensor cores, the rest fp16 (on cpu emulated, slower than fp32: "
                  "for checking). 8 bits are calibrated at load on --calibrate's texts "
                  "(default: a small built-in multilingual corpus), with an accuracy report "
                  "against fp32 on stderr; an 8-bit plan (bertrt build --precision int8|fp8) "
                  "runs as it was built, without calibrating")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "int8", "fp8"}));
  AddCalibrationOptions(cmd, &flags->calibration, "With --precision int8 or fp8");
  cmd->add_option("--threads", flags->threads, threads_help)->check(CLI::NonNegativeNumber);
  cmd->add_option("--gelu", flags->gelu,
                  "Models with the erf GELU (hidden_act \"gelu\") on cuda fp16/bf16: exact "
                  "(fused into the GEMM on sm_90 at up to 64 and from 2,432 rows, else a pass "
                  "of its own) or tanh (cuBLASLt's epilogue: up to 7% faster on an H200, but "
                  "a different function, by up to 4.7e-4; all-MiniLM-L6-v2's "
                  "fp16 embeddings were then 2.3x further from fp32 than PyTorch's fp16); "
                  "fp32 and cpu are always exact")
      ->check(CLI::IsMember({"exact", "tanh"}))
      ->capture_default_str();
}

void AddCalibrationOptions(CLI::App* cmd, serving::CalibrationSpec* spec, const std::string& when) {
  cmd->add_option_function<std::string>(
         "--calibrate",
         [spec](const std::string& path) {
           auto texts = ReadCalibrationFile(path);
           if (!texts.ok()) throw CLI::ValidationError("--calibrate", texts.status().message());
           spec->texts = std::move(texts).value();
         },
         when + ": representative inputs to calibrate on, JSON Lines "
                "({\"text\": ..., \"text_pair\": ...}) or one text per line; every fifth is held "
                "out for the accuracy report")
      ->check(CLI::ExistingFile);
  cmd->add_option("--calibrate-samples", spec->samples,
                  when + ": use at most this many calibration inputs (0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--calibration", spec->method,
                  when + ": how each GEMM input is scaled: token (int8's default: each "
                         "row's own range, found as it runs, the most accurate), or one "
                         "calibrated scale per GEMM: max (fp8's default: the largest |x| seen), "
                         "pNN (that percentile of |x|, e.g. p99.99; larger values clip) or mse "
                         "(the least expected squared error)")
      ->check([](const std::string& v) {
        auto m = serving::ParseCalibrationMethod(v);
        return m.ok() ? std::string() : m.status().message();
      });
  cmd->add_option_function<std::string>(
      "--accuracy-budget",
      [spec](const std::string& text) {
        auto budget = serving::ParseAccuracyBudget(text);
        if (!budget.ok())
          throw CLI::ValidationError("--accuracy-budget", budget.status().message());
        spec->budget = *budget;
      },
      when + ": what 8 bits must keep of fp32's accuracy on the held-out inputs, as "
             "key=value pairs (default cosine_mean=0.999,cosine_min=0.99,top10=0.95,"
             "argmax=0.995: embeddings' cosine mean and min and top-10 retrieval overlap, "
             "predictions' argmax agreement); past it, the Linears that cost most go back "
             "to fp32 until it holds");
}

serving::InstanceSpec Instance(const EngineFlags& flags, int gpu) {
  serving::InstanceSpec spec;
  spec.device = flags.device;
  spec.gpu = gpu;
  spec.precision = ResolvePrecision(flags.device, flags.precision);
  spec.threads = flags.threads;
  spec.gelu = flags.gelu;
  spec.calibration = flags.calibration;
  return spec;
}

StatusOr<std::unique_ptr<Engine>> CreateEngine(std::shared_ptr<const Model> model,
                                               const Tokenizer& tokenizer,
                                               const EngineFlags& flags, int gpu) {
  return serving::CreateEngine(std::move(model), tokenizer, Instance(flags, gpu), PrintNotice);
}

StatusOr<std::vector<serving::CalibrationText>> ReadCalibrationFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot be read");
  std::vector<serving::CalibrationText> texts;
  std::string line;
  int number = 0;
  std::optional<bool> jsonl;  // decided by the first non-empty line
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (!jsonl) jsonl = line[line.find_first_not_of(" \t")] == '{';
    if (!*jsonl) {
      texts.push_back({line, ""});
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    auto text = j.is_object() ? j.find("text") : j.end();
    if (!j.is_object() || text == j.end() || !text->is_string())
      return InvalidArgument(path + " line " + std::to_string(number) +
                             ": expected {\"text\": \"...\"} (JSON Lines), or a file of one "
                             "text per line");
    serving::CalibrationText t{text->get<std::string>(), ""};
    auto pair = j.find("text_pair");
    if (pair != j.end() && pair->is_string()) t.text_pair = pair->get<std::string>();
    texts.push_back(std::move(t));
  }
  if (texts.empty()) return InvalidArgument(path + ": no calibration inputs in it");
  return texts;
}

Status SelfCheckGpuEngine(const LoadedModel& loaded, const EngineFlags& flags, Engine& engine) {
  // An 8-bit engine was held to its model's check as it was made.
  if (engine.Quantization()) return Status::Ok();
  ASSIGN_OR_RETURN(const Precision precision,
                   ParsePrecision(ResolvePrecision(flags.device, flags.precision)));
  ASSIGN_OR_RETURN(const EngineSelfCheck check,
                   EngineSelfCheck::Create(loaded.model, *loaded.tokenizer));
  ASSIGN_OR_RETURN(const VerifyReport report, check.Check(engine, precision));
  PrintNotice("self-check against the CPU engine in fp32 passed (" + DescribeReport(report) + ")");
  return Status::Ok();
}

std::unique_ptr<GpuContextWarmup> WarmUpGpus(const EngineFlags& flags, std::vector<int> gpus) {
  if (flags.device != "cuda") return nullptr;
  return std::make_unique<GpuContextWarmup>(std::move(gpus));
}

std::vector<CLI::Option*> AddServingOptions(CLI::App* cmd, ServingFlags* f) {
  return {
      cmd->add_option("--instances", f->instances,
                      "Engine instances per model: per GPU with --device cuda, in all on the "
                      "CPU (a config.pbtxt instance_group overrides it)")
          ->check(CLI::PositiveNumber),
      cmd->add_option("--gpus", f->gpus,
                      "With --device cuda, the GPUs to serve on, e.g. 0,1 (default: every "
                      "visible GPU)")
          ->delimiter(',')
          ->check(CLI::NonNegativeNumber),
      cmd->add_option("--max-batch-tokens", f->max_batch_tokens, "Token budget of a batch")
          ->check(CLI::PositiveNumber),
      cmd->add_option("--max-batch-size", f->max_batch_size, "Sequences per batch")
          ->check(CLI::PositiveNumber),
      cmd->add_option("--max-client-batch-size", f->max_client_batch_size,
                      "Inputs one request may carry, as /info's max_client_batch_size says "
                      "(default: 2,048, as OpenAI's API, or the max batch size if larger; a request "
                      "larger than a batch runs in parts); beyond: 413 / OUT_OF_RANGE")
          ->check(CLI::PositiveNumber),
      cmd->add_option("--max-queue-delay-us", f->max_queue_delay_us,
                      "Longest wait of an idle instance for a fuller batch (0, Triton's "
                      "default: batches form from what queues while instances are busy)")
          ->check(CLI::NonNegativeNumber),
      cmd->add_option("--max-queue-size", f->max_queue_size,
                      "Requests waiting per model; beyond: 429")
          ->check(CLI::PositiveNumber),
      cmd->add_option("--request-timeout-ms", f->request_timeout_ms,
                      "Queue timeout per request (0: none)")
          ->check(CLI::NonNegativeNumber),
      cmd->add_flag("--auto-truncate", f->auto_truncate,
                    "Cut texts longer than the model takes to its limit instead of answering "
                    "413 / OUT_OF_RANGE"),
      AddMaxNormalizedChars(cmd, &f->max_normalized_chars),
      cmd->add_option("--warmup-shapes", f->warmup,
                      "Batch shapes BATCHxLENGTH (e.g. 1x128,8x128) run on every instance "
                      "before the model is ready, so that on a GPU their CUDA graphs are "
                      "captured before traffic meets them (config.pbtxt: model_warmup). "
                      "Either number may be a range MIN-MAX (1-32x100-192): every batch "
                      "within --max-batch-size and --max-batch-tokens, once per distinct "
                      "shape a GPU instance runs it as")
          ->delimiter(',')
          ->check([](const std::string& v) {
            auto s = serving::ParseWarmupShape(v);
            return s.ok() ? std::string() : s.status().message();
          }),
      cmd->add_flag("--skip-verify", f->skip_verify,
                    "Serve GPU instances without their self-check: by default each runs "
                    "built-in samples against the CPU engine in fp32 at load and the model "
                    "does not load if they disagree"),
  };
}

serving::ServeDefaults MakeServeDefaults(const EngineFlags& engine, const ServingFlags& serving,
                                        serving::MetricsSink* metrics) {
  serving::ServeDefaults d;
  d.config_source = server::TritonConfigSource();
  d.make_engine = [](std::shared_ptr<const Model> model, const Tokenizer& tokenizer,
                     const serving::InstanceSpec& spec) {
    return serving::CreateEngine(std::move(model), tokenizer, spec, PrintNotice);
  };
  d.calibration = engine.calibration;
  d.device = engine.device;
  d.precision = engine.precision;
  d.threads = engine.threads;
  d.gelu = engine.gelu;
  d.instances = serving.instances;
  d.gpus = serving.gpus;
  d.scheduler.max_batch_tokens = serving.max_batch_tokens;
  d.scheduler.max_batch_size = serving.max_batch_size;
  d.scheduler.max_client_batch_size = serving.max_client_batch_size;
  d.scheduler.max_queue_delay = std::chrono::microseconds(serving.max_queue_delay_us);
  d.scheduler.max_queue_size = static_cast<size_t>(serving.max_queue_size);
  d.scheduler.request_timeout = std::chrono::milliseconds(serving.request_timeout_ms);
  d.auto_truncate = serving.auto_truncate;
  d.max_normalized_chars = serving.max_normalized_chars;
  d.self_check = !serving.skip_verify;
  d.metrics = metrics;
  for (const std::string& shape : serving.warmup)
    d.warmups.push_back(*serving::ParseWarmupShape(shape));  // checked by the option
  return d;
}

CLI::Option* AddMaxNormalizedChars(CLI::App* cmd, size_t* value) {
  return cmd
      ->add_option("--max-normalized-chars", *value,
                   "Refuse a text (OUT_OF_RANGE) once the part of it that tokenizing needs "
                   "passes N chars normalized (NFKC turns one char into up to 18), or a piece "
                   "of it that cannot be normalized apart is longer. Tokenizing reads a long "
                   "text only as far as the token limit needs; this bounds the rest. 0: none")
      ->capture_default_str();
}

int Fail(const Status& status, int exit_code) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return exit_code;
}

namespace {
double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressBar::ProgressBar(std::string label, size_t total)
    : label_(std::move(label)), total_(total), enabled_(isatty(STDERR_FILENO) != 0) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && done_ > 0) Draw(true);
}

void ProgressBar::Advance(size_t n) {
  done_ += n;
  if (!enabled_) return;
  double now = NowSeconds();
  // Redrawing at most ten times a second keeps the terminal cheap.
  if (now - last_draw_ < 0.1 && (total_ == 0 || done_ < total_)) return;
  last_draw_ = now;
  Draw(false);
}

void ProgressBar::Draw(bool final) {
  if (total_ > 0) {
    const int width = 30;
    int filled = static_cast<int>(width * std::min<double>(1.0, double(done_) / total_));
    std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu", label_.c_str(), filled,
                 "##############################", width - filled, "", done_, total_);
  } else {
    std::fprintf(stderr, "\r%s %zu", label_.c_str(), done_);
  }
  if (final) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace bertrt::cli

namespace bertrt::cli {

StatusOr<TextInput> ParseTextLine(const std::string& line, size_t line_number) {
  const std::string where = "line " + std::to_string(line_number) + ": ";
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return InvalidArgument(where + "not valid JSON; expected {\"text\": \"...\"}");
  if (!j.is_object())
    return InvalidArgument(where + "expected a JSON object with a \"text\" field");
  auto text = j.find("text");
  if (text == j.end()) return InvalidArgument(where + "missing the \"text\" field");
  if (!text->is_string()) return InvalidArgument(where + "\"text\" must be a string");
  TextInput input;
  input.text = text->get<std::string>();
  auto pair = j.find("text_pair");
  if (pair != j.end() && !pair->is_null()) {
    if (!pair->is_string()) return InvalidArgument(where + "\"text_pair\" must be a string");
    input.text_pair = pair->get<std::string>();
  }
  return input;
}

nlohmann::json ErrorRecord(const Status& status) {
  return nlohmann::json{{"error", status.message()}};
}

}  // namespace bertrt::cli

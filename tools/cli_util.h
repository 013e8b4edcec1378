// Pieces shared by the bertrt subcommands: loading a model for the command
// line, creating an engine from --device/--threads, JSON number formatting and
// a progress bar.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bertrt/cuda_engine.h"
#include "bertrt/devices.h"
#include "bertrt/engine.h"
#include "bertrt/importer.h"
#include "core/json_float.h"
#include "serving/model_registry.h"
#include "serving/engine_factory.h"

namespace bertrt::cli {

// "notice: <text>" on stderr: where the CLI's importer, engines and commands
// say what they did on the user's behalf.
void PrintNotice(const std::string& notice);

// What MODEL may be, for the commands' help.
inline constexpr const char* kModelHelp =
    "A model directory (Hugging Face: safetensors, pytorch_model.bin or model.onnx; a "
    "TensorFlow BERT checkpoint folder), a plan file, a .onnx file, or a TensorFlow checkpoint "
    "prefix (model.ckpt-N)";

// --tokenizer and --labels, for the commands that load a MODEL.
struct ImportFlags {
  std::string tokenizer;
  std::string labels;
};
void AddImportOptions(CLI::App* cmd, ImportFlags* flags);
ImportOptions MakeImportOptions(const ImportFlags& flags);

// Loads MODEL, printing notices to stderr (`print_notices`: inspect lists
// them itself).
StatusOr<LoadedModel> LoadForCli(const std::string& path, const ImportFlags& flags = {},
                                 bool print_notices = true);

// --device, --precision and --threads, as run, bench and serve take them.
struct EngineFlags {
  std::string device = "cpu";
  std::string precision;       // empty: the device's default
  int threads = 0;             // 0: all cores
  std::string gelu = "exact";  // exact | tanh: CudaEngineOptions::approximate_erf_gelu
  serving::CalibrationSpec calibration;  // for int8 and fp8
};
void AddEngineOptions(CLI::App* cmd, EngineFlags* flags,
                      const std::string& threads_help = "CPU threads (0: all cores)");
// 8 bits' --calibrate FILE (texts; none: the built-in corpus), --calibrate-samples,
// --calibration (the method) and --accuracy-budget; `when` starts their help
// ("With --precision int8 or fp8").
void AddCalibrationOptions(CLI::App* cmd, serving::CalibrationSpec* spec, const std::string& when);

// How `bertrt serve` places and batches a model; `bertrt bench
// --serve-inprocess` takes the same flags, so that it runs what serve runs.
struct ServingFlags {
  int instances = 1;
  std::vector<int> gpus;
  // The batcher's own defaults (SchedulerOptions), in one place.
  int max_batch_tokens = SchedulerOptions{}.max_batch_tokens;
  int max_batch_size = SchedulerOptions{}.max_batch_size;
  int max_client_batch_size = SchedulerOptions{}.max_client_batch_size;  // 0: max_batch_size
  int max_queue_delay_us = static_cast<int>(SchedulerOptions{}.max_queue_delay.count());
  int max_queue_size = static_cast<int>(SchedulerOptions{}.max_queue_size);
  // A server's requests give up after 30 s in the queue (the batcher alone
  // waits for ever: `bertrt run` has no client to answer in time).
  int request_timeout_ms = 30000;
  bool auto_truncate = false;
  size_t max_normalized_chars = serving::ServeDefaults{}.max_normalized_chars;
  std::vector<std::string> warmup;  // BATCHxLENGTH shapes
  bool skip_verify = false;         // no EngineSelfCheck of GPU instances
};
// Adds --instances, --gpus, --max-batch-tokens, --max-batch-size,
// --max-client-batch-size, --max-queue-delay-us, --max-queue-size, --request-timeout-ms,
// --auto-truncate, --max-normalized-chars, --warmup-shapes and --skip-verify.
std::vector<CLI::Option*> AddServingOptions(CLI::App* cmd, ServingFlags* flags);
// The serving defaults of every model (a config.pbtxt may override them).
serving::ServeDefaults MakeServeDefaults(const EngineFlags& engine, const ServingFlags& serving,
                                        serving::MetricsSink* metrics);

// The engine placement --device, --precision (resolved to the device's
// default when not given), --threads and --gelu ask for, on GPU `gpu`.
serving::InstanceSpec Instance(const EngineFlags& flags, int gpu = 0);
// The --precision flag's value, or the device's default when it was not given.
using serving::ResolvePrecision;

// serving::CreateEngine for the command line's flags, notices on stderr.
// For `run`, see SelfCheckGpuEngine.
StatusOr<std::unique_ptr<Engine>> CreateEngine(std::shared_ptr<const Model> model,
                                               const Tokenizer& tokenizer,
                                               const EngineFlags& flags, int gpu = 0);
// --calibrate FILE's inputs: JSON Lines ({"text": ..., "text_pair": ...}, as
// `bertrt run` reads them) or, when the first non-empty line is not a JSON
// object, one text per line; empty lines are skipped.
StatusOr<std::vector<serving::CalibrationText>> ReadCalibrationFile(const std::string& path);
// `bertrt run`'s EngineSelfCheck of a CUDA engine: a line on stderr with
// the numbers; the error when it fails.
Status SelfCheckGpuEngine(const LoadedModel& loaded, const EngineFlags& flags, Engine& engine);
// With --device cuda: creates the contexts of `gpus` (every visible GPU when
// empty) and opens cuBLASLt while the caller reads the model; nullptr on the CPU.
std::unique_ptr<GpuContextWarmup> WarmUpGpus(const EngineFlags& flags, std::vector<int> gpus);

// --max-normalized-chars, as serve, run and tokenize take it.
CLI::Option* AddMaxNormalizedChars(CLI::App* cmd, size_t* value);

// Prints "error: <message>" to stderr and returns `exit_code`.
int Fail(const Status& status, int exit_code);

// A one-line progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(std::string label, size_t total = 0);
  ~ProgressBar();
  void Advance(size_t n = 1);

 private:
  void Draw(bool final);
  std::string label_;
  size_t total_;
  size_t done_ = 0;
  bool enabled_;
  double last_draw_ = 0;
};

}  // namespace bertrt::cli

namespace bertrt::cli {

// The server's input record (text and optional text_pair).
using serving::TextInput;

// Parses line `line_number` (1-based, for the error message) of JSON Lines:
// {"text": ..., "text_pair": ...}.
StatusOr<TextInput> ParseTextLine(const std::string& line, size_t line_number);

// {"error": "line N: <message>"}
nlohmann::json ErrorRecord(const Status& status);

}  // namespace bertrt::cli

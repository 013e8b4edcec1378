// A served model: one version of one model, its tokenizer plus a scheduler
// over its engine instances (on CPUs and GPUs), and its outputs as
// DescribeOutputs lays them out (one warm-up run at load checks that the
// engines return exactly those); how inputs are encoded for it, and how a
// request through it is timed and counted. The registry of served models is
// model_registry.h. Knows no HTTP, JSON or protobuf.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bertrt/head_outputs.h"
#include "bertrt/importer.h"
#include "scheduler/scheduler.h"
#include "serving/engine_factory.h"
#include "serving/model_settings.h"
#include "serving/model_statistics.h"

namespace bertrt::serving {

// Makes an instance's engine; the tokenizer tokenizes an int8 engine's
// calibration texts.
using EngineFactory = std::function<StatusOr<std::unique_ptr<Engine>>(
    std::shared_ptr<const Model>, const Tokenizer&, const InstanceSpec&)>;

// The command line's settings: every model's defaults, which its
// config.pbtxt may override.
struct ServeDefaults {
  EngineFactory make_engine;
  std::string device = "cpu";  // "cpu" | "cuda"
  std::string precision;       // empty: fp16 on GPUs (CPUs always run fp32)
  int threads = 0;             // CPU threads per CPU instance; 0: the cores shared out
  std::string gelu = "exact";  // --gelu: how CUDA fp16/bf16 instances run the erf GELU
  CalibrationSpec calibration; // int8 CPU instances' calibration (--calibrate, --calibration)
  int instances = 1;           // per GPU on cuda, in all on cpu
  std::vector<int> gpus;       // empty: every visible GPU
  SchedulerOptions scheduler;
  VersionPolicy version_policy;
  // Texts longer than a model takes are cut to its limit instead of refused
  // (TEI's --auto-truncate), whatever the request's own truncate says.
  bool auto_truncate = false;
  // --max-normalized-chars: a text whose part that tokenizing needs
  // normalizes to more chars is refused (EncodeLimits). Tokenizing is
  // bounded by the model's limit already; this bounds what that cannot (a
  // text with no place to cut it, a tokenizer that gives none). A
  // 512-token model needs a few thousand chars.
  size_t max_normalized_chars = 1'000'000;
  MetricsSink* metrics = nullptr;  // batch histograms and statistics, when set
  // --warmup-shapes: run on every instance at load (a config.pbtxt's model_warmup replaces them).
  std::vector<WarmupSample> warmups;
  // Each GPU instance passes EngineSelfCheck (against the CPU engine in
  // fp32) before its model loads; --skip-verify turns it off.
  bool self_check = true;
  // How a repository's config.pbtxt is read and checked (the server's).
  ModelConfigSource config_source;
};

// One model's settings once the defaults and its config.pbtxt are combined.
struct ModelServing {
  std::vector<InstanceSpec> instances;
  SchedulerOptions scheduler;
  VersionPolicy version_policy;
  std::vector<WarmupSample> warmups;  // run on every instance at load
  ModelConfigFile config;             // as read (empty without a config.pbtxt)
};
StatusOr<ModelServing> ResolveServing(const ServeDefaults& defaults, const ModelConfigFile& config);

struct TextInput {
  std::string text;
  std::optional<std::string> text_pair;
};

struct EncodeOptions {
  // Cut an input longer than the model's limit to it instead of refusing it
  // (the server's auto_truncate cuts whatever this says).
  bool truncate = false;
  // Cut from the start, keeping each text's end (TEI's truncation_direction
  // "Left"); the same token counts as the default cut from the end.
  bool truncate_left = false;
  // The sentence-transformers prompt put before each text (see
  // ModelConfig::PromptText): nullopt takes the model's default one.
  std::optional<std::string> prompt_name;
  // Whether the request could have asked for `truncate` (TEI's and KServe's
  // field; OpenAI's route has none): the too-long error names it only then.
  bool truncate_field = true;
  // `bertrt run`'s --max-length (0: the model's max_seq_length) and
  // --truncation (which text of a pair loses tokens).
  int max_length = 0;
  Truncation truncation = Truncation::kLongestFirst;
  std::string TooLongHint() const {
    return truncate_field ? "; shorten it, set truncate, or serve with --auto-truncate"
                          : "; shorten it, or serve with --auto-truncate";
  }
};

class ServedModel {
 public:
  static StatusOr<std::unique_ptr<ServedModel>> Load(
      const std::string& name, const std::string& version, const std::string& path,
      const ModelServing& serving, const ServeDefaults& defaults, const ImportOptions& import = {});
  // Load's two steps, for a caller that loads the model or makes its engines
  // itself (`bertrt run`): the engines of serving.instances (each GPU one
  // self-checked unless defaults.self_check is off), then the served model
  // over `engines` (one per instance, in order).
  static StatusOr<std::vector<std::unique_ptr<Engine>>> CreateInstances(
      const std::string& name, const LoadedModel& loaded, const ModelServing& serving,
      const ServeDefaults& defaults);
  static StatusOr<std::unique_ptr<ServedModel>> Create(
      const std::string& name, const std::string& version, const std::string& source,
      LoadedModel loaded, std::vector<std::unique_ptr<Engine>> engines, const ModelServing& serving,
      const ServeDefaults& defaults);
  ~ServedModel();

  // Tokenizes one input. Empty text: InvalidArgument; longer than the model's
  // limit: OutOfRange, unless `truncate` or the server's auto_truncate (then
  // cut to the limit, and *truncated set when given).
  StatusOr<SequenceInput> Encode(const TextInput& input, const EncodeOptions& options,
                                 bool* truncated = nullptr) const;
  // Token ids given as they are, held to the rules a text's tokens meet:
  // none at all, an id outside the vocabulary or a type id outside the
  // model's types is InvalidArgument; more than the model's limit is
  // OutOfRange unless truncating (then cut, from the start with truncate_left).
  StatusOr<SequenceInput> EncodeIds(SequenceInput ids, const EncodeOptions& options) const;
  StatusOr<SequenceInput> Encode(const TextInput& input, bool truncate) const {
    EncodeOptions options;
    options.truncate = truncate;
    return Encode(input, options);
  }

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& source() const { return source_; }
  // The instances, e.g. "cuda:0 fp16 x1, cuda:1 fp16 x1".
  const std::string& placement() const { return placement_; }
  const std::vector<InstanceSpec>& instances() const { return instances_; }
  // The first instance's device ("cpu" | "cuda") and precision.
  const std::string& device() const { return instances_.front().device; }
  const std::string& precision() const { return instances_.front().precision; }
  const ModelConfig& config() const { return loaded_.model->config; }
  const Tokenizer& tokenizer() const { return *loaded_.tokenizer; }
  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  // What it is served with (the defaults and its config.pbtxt combined).
  const ModelServing& serving() const { return serving_; }
  int max_input_length() const { return max_input_length_; }
  size_t max_normalized_chars() const { return max_normalized_chars_; }
  // --auto-truncate: every input longer than the model takes is cut.
  bool auto_truncate() const { return auto_truncate_; }
  // The head's outputs, and last_hidden_state (only on request).
  const std::vector<OutputDescription>& outputs() const { return outputs_; }
  const OutputDescription* FindOutput(const std::string& name) const {
    return bertrt::FindOutput(outputs_, name);
  }
  // Triton's statistics of this loaded version (zero at its load; the
  // statistics extension and nv_inference_* read them).
  VersionStatistics& statistics() const { return *statistics_; }
  // When this version was loaded, in seconds since the epoch (OpenAI's
  // model `created`).
  int64_t loaded_unix_seconds() const { return loaded_unix_seconds_; }

 private:
  std::string name_, version_, source_, placement_;
  int64_t loaded_unix_seconds_ = std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
  std::vector<InstanceSpec> instances_;
  ModelServing serving_;
  LoadedModel loaded_;
  std::unique_ptr<Scheduler> scheduler_;
  int max_input_length_ = 0;
  bool auto_truncate_ = false;
  size_t max_normalized_chars_ = 0;
  std::vector<OutputDescription> outputs_;
  std::shared_ptr<VersionStatistics> statistics_ = std::make_shared<VersionStatistics>();
  MetricsSink* metrics_ = nullptr;  // lists statistics_ while this version is loaded
};

// One inference request through a served model, timed and counted the same
// way whichever front end took it (KServe over HTTP or gRPC, TEI, OpenAI):
// Triton's statistics (compute_input: from its arrival to the batcher, i.e.
// reading and tokenizing it; queue and compute: the batcher's;
// compute_output: from the result to Finish, which the front ends call once
// the answer's body is written) and the Prometheus request metrics, where
// bertrt_request_stage_seconds splits it into parse, tokenize, queue,
// compute and respond.
class RequestTimer {
 public:
  using Clock = std::chrono::steady_clock;
  // `arrival`: when the request came (its parsing then counts as its own
  // stage, the time until the timer is made).
  RequestTimer(ServedModel& model, MetricsSink* metrics, Clock::time_point arrival = Clock::now());
  // The batcher's result for `request`.
  StatusOr<InferResult> Infer(InferRequest request);
  // Whether Infer ran: a request that never reached the batcher (a route
  // that runs no model, like /tokenize) is no inference to count.
  bool ran() const { return computed_ != Clock::time_point{}; }
  // Counts the request once, with its outcome (the batcher's, when it failed).
  void Finish(const Status& outcome);

 private:
  ServedModel& model_;
  MetricsSink* metrics_;
  Clock::time_point start_, computed_{};
  Status infer_status_;
  InferenceRecord record_;
};

}  // namespace bertrt::serving

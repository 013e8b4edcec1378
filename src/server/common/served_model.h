// The models a server holds. A ServedModel is one version of one model: its
// tokenizer plus a scheduler over its engine instances (on CPUs and GPUs), and
// its outputs as DescribeOutputs lays them out (one warm-up run at load checks
// that the engines return exactly those). The ModelRegistry maps names and
// versions to ServedModels, reads the repository and swaps versions in and out
// while requests are in flight: a request holds a shared_ptr to the version it
// runs on, so an unloaded or replaced version finishes its work first.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bertrt/head_outputs.h"
#include "bertrt/importer.h"
#include "scheduler/scheduler.h"
#include "server/common/metrics.h"
#include "server/common/model_config.h"
#include "serving/engine_factory.h"

namespace bertrt::server {

// Where one engine instance runs, and how.
using serving::InstanceSpec;

using EngineFactory = std::function<StatusOr<std::unique_ptr<Engine>>(std::shared_ptr<const Model>,
                                                                      const InstanceSpec&)>;

// The command line's settings: every model's defaults, which its
// config.pbtxt may override.
struct ServeDefaults {
  EngineFactory make_engine;
  std::string device = "cpu";  // "cpu" | "cuda"
  std::string precision;       // empty: fp16 on GPUs (CPUs always run fp32)
  int threads = 0;             // CPU threads per CPU instance; 0: the cores shared out
  std::string gelu = "exact";  // --gelu: how CUDA fp16/bf16 instances run the erf GELU
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
  Metrics* metrics = nullptr;  // batch histograms, when set
  // --warmup-shapes: run on every instance at load (a config.pbtxt's model_warmup replaces them).
  std::vector<WarmupSample> warmups;
  // Each GPU instance passes EngineSelfCheck (against the CPU engine in
  // fp32) before its model loads; --skip-verify turns it off.
  bool self_check = true;
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

// A model's name when none is given: its directory's, its plan file's stem,
// or a weights file's folder's (model.onnx, model.ckpt-1000).
std::string DefaultModelName(const std::string& path);

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
  static StatusOr<std::unique_ptr<ServedModel>> Load(const std::string& name,
                                                     const std::string& version,
                                                     const std::string& path,
                                                     const ModelServing& serving,
                                                     const ServeDefaults& defaults,
                                                     const ImportOptions& import = {});
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
  Metrics* metrics_ = nullptr;  // lists statistics_ while this version is loaded
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
  RequestTimer(ServedModel& model, Metrics* metrics, Clock::time_point arrival = Clock::now());
  // The batcher's result for `request`.
  StatusOr<InferResult> Infer(InferRequest request);
  // Whether Infer ran: a request that never reached the batcher (a route
  // that runs no model, like /tokenize) is no inference to count.
  bool ran() const { return computed_ != Clock::time_point{}; }
  // Counts the request once, with its outcome (the batcher's, when it failed).
  void Finish(const Status& outcome);

 private:
  ServedModel& model_;
  Metrics* metrics_;
  Clock::time_point start_, computed_{};
  Status infer_status_;
  InferenceRecord record_;
};

// A model of the repository as /v2/repository/index lists it.
struct RepositoryEntry {
  std::string name, version;
  std::string state;  // "READY" | "UNAVAILABLE"
  std::string reason;
};

// How the repository's models are loaded (Triton's --model-control-mode):
// kNone loads every model at start and never again; kPoll also rescans the
// repository and loads, reloads and unloads what changed; kExplicit loads
// only what --load-model names and what the load/unload API asks for.
enum class ModelControl { kNone, kPoll, kExplicit };
StatusOr<ModelControl> ParseModelControl(const std::string& text);

class ModelRegistry {
 public:
  explicit ModelRegistry(ServeDefaults defaults) : defaults_(std::move(defaults)) {}
  ~ModelRegistry();

  // One model; served as `name` (default: the directory or plan file stem), version "1".
  // `import`: --tokenizer and --labels (its notices go to stderr as every load's).
  Status LoadSingle(const std::string& path, std::string name, const ImportOptions& import = {});
  // DIR/<model>/[config.pbtxt] and DIR/<model>/<version>/ with model.plan or
  // HF files. kNone and kPoll load every model; kExplicit those in `startup`.
  // Fails on the first model that does not load (a server that starts must
  // serve what it was asked to).
  Status OpenRepository(const std::string& dir, ModelControl control,
                        const std::vector<std::string>& startup = {});
  // kPoll: rescans the repository every `seconds` on a thread of its own.
  void StartPolling(double seconds);
  // kPoll: has that thread rescan now (SIGHUP), without waiting for its period.
  void PollNow();

  // NotFound names what is served. An empty version means the latest served.
  StatusOr<std::shared_ptr<ServedModel>> Find(const std::string& name,
                                              const std::string& version = "") const;
  // The model the bare TEI/OpenAI routes use: --default-model's, else the
  // first served by name (Unavailable when none).
  StatusOr<std::shared_ptr<ServedModel>> Default() const;
  void set_default_model(std::string name) { default_model_ = std::move(name); }
  // Every served version, by name then version.
  std::vector<std::shared_ptr<ServedModel>> Served() const;
  size_t served_models() const;

  std::vector<RepositoryEntry> Index() const;
  // The load/unload API (kExplicit only): (re)loads the model from the
  // repository, swapping versions in without dropping requests; or stops
  // serving it (in-flight requests finish). `config_json`, when given, is
  // Triton's load_model(config=...): the model's settings in Triton's JSON
  // form, taken for this load instead of its config.pbtxt (every version
  // reloads with them; a later load without one goes back to the file).
  Status Load(const std::string& name, const std::string& config_json = "");
  Status Unload(const std::string& name);
  // Rescans the repository once: loads new models and versions, reloads those
  // whose files or config changed, unloads what disappeared.
  void Poll();

  // Stops polling and drains every scheduler (queued work is finished).
  void Shutdown();
  // Fails what every model still has queued (Scheduler::CancelQueued).
  void CancelQueued(const Status& why);

  // /v2/health/ready and gRPC ServerReady. Strict (Triton's
  // --strict-readiness, the default): Ok while at least one model is served
  // and no model the server was asked to serve failed to load; Unavailable,
  // saying why, otherwise (every model unloaded or removed, a new version that
  // did not load). Not strict: Ok once the server listens.
  Status Readiness() const;
  void set_strict_readiness(bool strict) { strict_readiness_ = strict; }

 private:
  struct Entry {
    std::map<long, std::shared_ptr<ServedModel>> versions;  // served
    std::map<long, std::string> fingerprints;               // of the served versions
    std::string reason;                                     // of the last failed load
    std::string ignored_noted;     // the config's ignored fields, as last logged
    bool config_override = false;  // the served versions were loaded with Load's config_json
  };
  // Loads `name` from the repository (load_mu_ held), with `config_json` (Load's) if given.
  Status LoadFromRepository(const std::string& name, const std::string& config_json = "");
  void UnloadLocked(const std::string& name);
  // FailedPrecondition unless serving a repository in kExplicit mode.
  Status CheckExplicit() const;

  ServeDefaults defaults_;
  std::string repository_;
  ModelControl control_ = ModelControl::kNone;
  bool strict_readiness_ = true;
  std::string default_model_;  // "": the first by name
  mutable std::mutex mu_;      // guards models_
  std::map<std::string, Entry> models_;
  std::mutex load_mu_;  // one load, unload or poll at a time
  std::thread poller_;
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;
  bool poll_now_ = false;
};

}  // namespace bertrt::server

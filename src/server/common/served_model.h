// The models a server holds: each loaded once, tokenizer plus a scheduler over
// N engine instances, with its output layout learned from one warm-up run
// (so the metadata endpoints describe what the engine really returns).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bertrt/importer.h"
#include "scheduler/scheduler.h"
#include "server/common/metrics.h"

namespace bertrt::server {

struct OutputSpec {
  std::string name;
  bool per_token = false;
  int width = 0;
};

using EngineFactory =
    std::function<StatusOr<std::unique_ptr<Engine>>(std::shared_ptr<const Model>)>;

struct ServeOptions {
  EngineFactory make_engine;   // called once per instance
  std::string device = "cpu";  // for /info and the logs
  std::string precision = "fp32";
  int instances = 1;
  SchedulerOptions scheduler;
  Metrics* metrics = nullptr;  // batch histograms, when set
};

struct TextInput {
  std::string text;
  std::optional<std::string> text_pair;
};

class ServedModel {
 public:
  static StatusOr<std::unique_ptr<ServedModel>> Load(const std::string& name,
                                                     const std::string& version,
                                                     const std::string& path,
                                                     const ServeOptions& options);

  // Tokenizes one input. Empty text: InvalidArgument; longer than the model's
  // limit: OutOfRange, unless `truncate` (then cut to the limit).
  StatusOr<SequenceInput> Encode(const TextInput& input, bool truncate) const;

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& source() const { return source_; }
  const std::string& device() const { return device_; }
  const std::string& precision() const { return precision_; }
  const ModelConfig& config() const { return loaded_.model->config; }
  const Tokenizer& tokenizer() const { return *loaded_.tokenizer; }
  Scheduler& scheduler() { return *scheduler_; }
  int max_input_length() const { return max_input_length_; }
  // The head's outputs, and last_hidden_state (only on request).
  const std::vector<OutputSpec>& outputs() const { return outputs_; }
  const OutputSpec* FindOutput(const std::string& name) const;

 private:
  std::string name_, version_, source_, device_, precision_;
  LoadedModel loaded_;
  std::unique_ptr<Scheduler> scheduler_;
  int max_input_length_ = 0;
  std::vector<OutputSpec> outputs_;
};

class ModelRegistry {
 public:
  // One model; served as `name` (default: the directory or plan file stem), version "1".
  Status LoadSingle(const std::string& path, std::string name, const ServeOptions& options);
  // DIR/<model>/<version>/ with model.plan or HF files; the highest numeric
  // version of each model is served.
  Status LoadRepository(const std::string& dir, const ServeOptions& options);

  // NotFound names what is served. An empty version means the served one.
  StatusOr<ServedModel*> Find(const std::string& name, const std::string& version = "") const;
  // The repository's models and their states, and loading / unloading by name.
  // Shim for the gRPC repository RPCs until hot reload lands from main: every
  // model is READY, Load of a served model is a no-op, Unload is refused.
  struct RepositoryEntry {
    std::string name, version, state, reason;  // state: READY | UNAVAILABLE | LOADING
  };
  std::vector<RepositoryEntry> Index() const;
  Status Load(const std::string& name);
  Status Unload(const std::string& name);
  // The model the TEI/OpenAI endpoints use: the first by name.
  ServedModel& Default() const { return *models_.front(); }
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }
  // Drains every scheduler (queued work is finished).
  void Shutdown();

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
};

}  // namespace bertrt::server

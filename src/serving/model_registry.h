// The models a server holds. The ModelRegistry maps names and versions to
// ServedModels, reads the repository (Triton's folder tree: DIR/<model>/
// [config.pbtxt] and DIR/<model>/<version>/) and swaps versions in and out
// while requests are in flight: a request holds a shared_ptr to the version it
// runs on, so an unloaded or replaced version finishes its work first.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serving/served_model.h"

namespace bertrt::serving {

// A model's name when none is given: its directory's, its plan file's stem,
// or a weights file's folder's (model.onnx, model.ckpt-1000).
std::string DefaultModelName(const std::string& path);

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

}  // namespace bertrt::serving

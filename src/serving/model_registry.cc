#include "serving/model_registry.h"

#include <algorithm>
#include <filesystem>

#include "bertrt/plan.h"
#include "core/thread_name.h"

namespace bertrt::serving {
namespace fs = std::filesystem;

namespace {

std::string Fingerprint(const fs::path& model_dir, const fs::path& version_dir) {
  std::vector<std::string> parts;
  std::error_code ec;
  auto stamp = [&](const fs::path& p) {
    const auto size = fs::file_size(p, ec);
    const auto time = fs::last_write_time(p, ec).time_since_epoch().count();
    parts.push_back(p.lexically_relative(model_dir).string() + ":" + std::to_string(size) + ":" +
                    std::to_string(time));
  };
  if (fs::exists(model_dir / "config.pbtxt", ec)) stamp(model_dir / "config.pbtxt");
  for (auto it = fs::recursive_directory_iterator(version_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) stamp(it->path());
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) out += p + ";";
  return out;
}

std::vector<long> NumericVersions(const fs::path& model_dir) {
  std::vector<long> versions;
  std::error_code ec;
  for (const auto& v : fs::directory_iterator(model_dir, ec)) {
    const std::string s = v.path().filename().string();
    if (v.is_directory(ec) && !s.empty() && s.size() < 18 &&
        std::all_of(s.begin(), s.end(), ::isdigit))
      versions.push_back(std::stol(s));
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

StatusOr<std::vector<long>> SelectVersions(const std::vector<long>& available,
                                           const VersionPolicy& policy, const std::string& name) {
  switch (policy.kind) {
    case VersionPolicy::Kind::kAll:
      return available;
    case VersionPolicy::Kind::kSpecific: {
      std::vector<long> out;
      for (int64_t v : policy.versions) {
        if (std::find(available.begin(), available.end(), v) == available.end())
          return NotFound("model " + name + ": version_policy names version " + std::to_string(v) +
                          ", which has no directory");
        out.push_back(static_cast<long>(v));
      }
      return out;
    }
    case VersionPolicy::Kind::kLatest:
      break;
  }
  const size_t n = std::min(available.size(), static_cast<size_t>(policy.num_versions));
  return std::vector<long>(available.end() - n, available.end());
}

// Whether `name` can name a model of a repository: one path component, not
// "." or "..", so that no request reaches outside the repository or names it.
bool IsModelName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

std::vector<std::string> ModelDirs(const std::string& repository) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(repository, ec))
    if (e.is_directory(ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Runs the model_warmup samples on every instance and waits for what the
// engines do in the background (CUDA graph captures), so that a model is
// ready only once those batch shapes cost what they will cost in service.
// A range sample runs each distinct shape (Engine::ShapeKey) of its batches
// once per instance, skipping batches the scheduler never forms.
}  // namespace

StatusOr<ModelControl> ParseModelControl(const std::string& text) {
  if (text == "none") return ModelControl::kNone;
  if (text == "poll") return ModelControl::kPoll;
  if (text == "explicit") return ModelControl::kExplicit;
  return InvalidArgument("--model-control-mode " + text + ": expected none, poll or explicit");
}

ModelRegistry::~ModelRegistry() { Shutdown(); }

namespace {

// A git commit hash: how the Hugging Face cache names a snapshot's folder.
bool IsCommitHash(const std::string& s) {
  return s.size() == 40 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// A folder's name, unless it is a Hugging Face cache snapshot
// (models--ORG--NAME/snapshots/<hash>): then the model's, NAME.
std::string FolderModelName(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (!IsCommitHash(name) || dir.parent_path().filename() != "snapshots") return name;
  const std::string repo = dir.parent_path().parent_path().filename().string();
  const size_t sep = repo.rfind("--");
  return repo.rfind("models--", 0) == 0 && sep != std::string::npos && sep + 2 < repo.size()
             ? repo.substr(sep + 2)
             : name;
}

}  // namespace

std::string DefaultModelName(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (IsPlanFile(path)) return p.stem().string();
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  if (fs::is_directory(p, ec)) return FolderModelName(abs);
  // A weights file (model.onnx, model.ckpt-1000) is named after its folder.
  return abs.parent_path().filename().empty() ? p.stem().string()
                                              : FolderModelName(abs.parent_path());
}

Status ModelRegistry::LoadSingle(const std::string& path, std::string name,
                                 const ImportOptions& import) {
  if (name.empty()) name = DefaultModelName(path);
  {
    std::lock_guard lock(mu_);
    if (models_.count(name))
      return InvalidArgument("a model named \"" + name + "\" is already served");
  }
  ASSIGN_OR_RETURN(ModelServing serving, ResolveServing(defaults_, ModelConfigFile{}));
  ASSIGN_OR_RETURN(auto model, ServedModel::Load(name, "1", path, serving, defaults_, import));
  std::lock_guard lock(mu_);
  models_[name].versions[1] = std::move(model);
  return Status::Ok();
}

Status ModelRegistry::OpenRepository(const std::string& dir, ModelControl control,
                                     const std::vector<std::string>& startup) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return NotFound("--model-repository " + dir + ": not a directory");
  // One spelling of the root, so that load errors' paths can be made relative to it.
  repository_ = fs::absolute(dir, ec).lexically_normal().string();
  control_ = control;
  std::lock_guard load_lock(load_mu_);
  if (control == ModelControl::kExplicit) {
    for (const std::string& name : startup) RETURN_IF_ERROR(LoadFromRepository(name));
    return Status::Ok();
  }
  for (const std::string& name : ModelDirs(dir)) {
    if (NumericVersions(fs::path(dir) / name).empty()) {
      std::fprintf(stderr, "notice: %s/%s: no numeric version directory; skipped\n", dir.c_str(),
                   name.c_str());
      continue;
    }
    RETURN_IF_ERROR(LoadFromRepository(name));
  }
  if (served_models() == 0)
    return NotFound("--model-repository " + dir + ": no models (expected DIR/<model>/<version>/)");
  return Status::Ok();
}

Status ModelRegistry::LoadFromRepository(const std::string& name, const std::string& config_json) {
  const fs::path model_dir = fs::path(repository_) / name;
  std::error_code ec;
  if (!IsModelName(name) || !fs::is_directory(model_dir, ec))
    return NotFound("model " + name + " is not in the model repository");
  // What a client may read of a failed load (the index, a lookup's NotFound):
  // paths inside the repository relative to it, never the server's own layout.
  auto record = [&](Status st) {
    std::string reason = st.message();
    const std::string root = (fs::path(repository_) / "").string();
    for (size_t at; (at = reason.find(root)) != std::string::npos;) reason.erase(at, root.size());
    std::lock_guard lock(mu_);
    models_[name].reason = reason;
    return Status(st.code(), reason);
  };
  const bool override_config = !config_json.empty();
  const ModelConfigSource& source = defaults_.config_source;
  StatusOr<ModelConfigFile> config = ModelConfigFile{};
  if (override_config)
    config = source.parse_json ? source.parse_json(config_json, "the load request's config", name)
                               : Unimplemented("a load request's config is not read here");
  else if (source.read)
    config = source.read(model_dir.string(), name);
  if (!config.ok()) return record(config.status());
  auto serving = ResolveServing(defaults_, *config);
  if (!serving.ok())
    return record(
        Status(serving.status().code(), "model " + name + ": " + serving.status().message()));
  const std::vector<long> available = NumericVersions(model_dir);
  if (available.empty())
    return record(NotFound("model " + name + ": no numeric version directory in " + name + "/"));
  auto selected = SelectVersions(available, serving->version_policy, name);
  if (!selected.ok()) return record(selected.status());

  // The folders are walked before the lock is taken: every request's model
  // lookup takes it, and a walk of 60,000 files under it stalled them all at
  // each poll (issue 44, D9).
  std::map<long, std::string> fingerprints;
  for (long v : *selected) fingerprints[v] = Fingerprint(model_dir, model_dir / std::to_string(v));
  std::map<long, std::shared_ptr<ServedModel>> versions;
  {
    std::lock_guard lock(mu_);
    const Entry& current = models_[name];
    // A version is kept when neither its files nor its settings' source changed.
    for (const auto& [v, fp] : fingerprints) {
      auto it = current.fingerprints.find(v);
      if (it != current.fingerprints.end() && it->second == fp && !override_config &&
          !current.config_override)
        versions[v] = current.versions.at(v);
    }
  }
  // What the config sets and bertrt does not use, said once (not at every
  // poll, nor at every retry of a load that fails), and again if it changes.
  std::string ignored;
  for (const std::string& what : config->ignored)
    ignored += "notice: " + config->path + ": ignored: " + what + "\n";
  {
    std::lock_guard lock(mu_);
    std::string& noted = models_[name].ignored_noted;
    if (noted != ignored) std::fputs(ignored.c_str(), stderr);
    noted = ignored;
  }
  // New and changed versions load while the old ones keep serving.
  for (long v : *selected) {
    if (versions.count(v)) continue;
    const fs::path version_dir = model_dir / std::to_string(v);
    const fs::path plan = version_dir / "model.plan";
    const std::string path = fs::exists(plan, ec) ? plan.string() : version_dir.string();
    auto model = ServedModel::Load(name, std::to_string(v), path, *serving, defaults_);
    if (!model.ok())
      return record(Status(
          model.status().code(),
          "model " + name + " version " + std::to_string(v) + ": " + model.status().message()));
    std::fprintf(stderr, "[serve] loaded model %s version %ld (%s) on %s\n", name.c_str(), v,
                 path.c_str(), (*model)->placement().c_str());
    versions[v] = std::move(*model);
  }
  std::map<long, std::shared_ptr<ServedModel>> retired;
  {
    std::lock_guard lock(mu_);
    Entry& entry = models_[name];
    retired = std::move(entry.versions);
    entry.versions = std::move(versions);
    entry.fingerprints = std::move(fingerprints);
    entry.config_override = override_config;
    entry.reason.clear();
    for (const auto& [v, m] : entry.versions)
      if (retired.count(v) && retired[v] == m) retired.erase(v);
  }
  for (const auto& [v, m] : retired)
    std::fprintf(stderr, "[serve] retired model %s version %ld\n", name.c_str(), v);
  // `retired` goes here: each version finishes its queue once the last
  // request holding it is done.
  return Status::Ok();
}

void ModelRegistry::UnloadLocked(const std::string& name) {
  std::map<long, std::shared_ptr<ServedModel>> retired;
  {
    std::lock_guard lock(mu_);
    Entry& entry = models_[name];
    retired = std::move(entry.versions);
    entry.versions.clear();
    entry.fingerprints.clear();
    entry.reason = "unloaded";
  }
  if (!retired.empty()) std::fprintf(stderr, "[serve] unloaded model %s\n", name.c_str());
}

void ModelRegistry::StartPolling(double seconds) {
  poller_ = std::thread([this, seconds] {
    NameThisThread("repo-poller");
    std::unique_lock lock(poll_mu_);
    while (true) {
      poll_cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                        [this] { return stopping_ || poll_now_; });
      if (stopping_) break;
      poll_now_ = false;
      lock.unlock();
      Poll();
      lock.lock();
    }
  });
}

void ModelRegistry::PollNow() {
  {
    std::lock_guard lock(poll_mu_);
    poll_now_ = true;
  }
  poll_cv_.notify_all();
}

void ModelRegistry::Poll() {
  std::lock_guard load_lock(load_mu_);
  const std::vector<std::string> names = ModelDirs(repository_);
  std::vector<std::string> gone;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, entry] : models_)
      if (!entry.versions.empty() && std::find(names.begin(), names.end(), name) == names.end())
        gone.push_back(name);
  }
  for (const std::string& name : gone) UnloadLocked(name);
  for (const std::string& name : names) {
    std::string before;
    {
      std::lock_guard lock(mu_);
      before = models_[name].reason;
    }
    Status st = LoadFromRepository(name);
    if (!st.ok() && st.message() != before)
      std::fprintf(stderr, "[serve] poll: %s (the served versions, if any, stay)\n",
                   st.message().c_str());
  }
}

Status ModelRegistry::CheckExplicit() const {
  if (repository_.empty())
    return FailedPrecondition(
        "no model repository: start with --model-repository DIR "
        "--model-control-mode explicit to load models by name");
  if (control_ != ModelControl::kExplicit)
    return FailedPrecondition(
        "loading and unloading by API needs --model-control-mode explicit (this server "
        "runs in " +
        std::string(control_ == ModelControl::kPoll ? "poll" : "none") + " mode)");
  return Status::Ok();
}

Status ModelRegistry::Load(const std::string& name, const std::string& config_json) {
  RETURN_IF_ERROR(CheckExplicit());
  std::lock_guard load_lock(load_mu_);
  // On a thread of its own that ends with the load: creating a model runs
  // OpenMP regions, and libgomp keeps a pool of worker threads for each
  // thread that starts one, for as long as that thread lives. Run on the
  // calling HTTP or gRPC handler thread (hundreds of them, long-lived), each
  // load on another handler left another pool behind (300 load/unload
  // cycles: 514 -> 770 threads, 32 -> 637 MB).
  Status loaded;
  std::thread([&] { loaded = LoadFromRepository(name, config_json); }).join();
  return loaded;
}

Status ModelRegistry::Unload(const std::string& name) {
  RETURN_IF_ERROR(CheckExplicit());
  std::lock_guard load_lock(load_mu_);
  {
    std::lock_guard lock(mu_);
    if (!models_.count(name)) {
      std::error_code ec;
      if (!IsModelName(name) || !fs::is_directory(fs::path(repository_) / name, ec))
        return NotFound("model " + name + " is not in the model repository");
    }
  }
  UnloadLocked(name);
  return Status::Ok();
}

StatusOr<std::shared_ptr<ServedModel>> ModelRegistry::Find(const std::string& name,
                                                           const std::string& version) const {
  std::string served, why;
  bool known = false;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && !it->second.versions.empty()) {
      const auto& versions = it->second.versions;
      if (version.empty()) return versions.rbegin()->second;
      for (const auto& [v, m] : versions)
        if (std::to_string(v) == version) return m;
      for (const auto& [v, m] : versions)
        served += (served.empty() ? "" : ", ") + std::to_string(v);
      return NotFound("model " + name + " has no version " + version + " (served: " + served + ")");
    }
    for (const auto& [n, e] : models_)
      if (!e.versions.empty()) served += (served.empty() ? "" : ", ") + n;
    known = it != models_.end();
    if (known) why = it->second.reason;
  }
  if (served.empty()) served = "none";
  // The repository is looked at outside the lock (every lookup takes it).
  std::error_code ec;
  if (known || (!repository_.empty() && IsModelName(name) &&
                fs::is_directory(fs::path(repository_) / name, ec))) {
    if (why.empty()) why = "not loaded";
    if (control_ == ModelControl::kExplicit)
      why += "; load it with POST /v2/repository/models/" + name + "/load";
    return NotFound("model " + name + " is not loaded (" + why + "); served: " + served);
  }
  return NotFound("unknown model " + name + " (served: " + served + ")");
}

StatusOr<std::shared_ptr<ServedModel>> ModelRegistry::Default() const {
  if (!default_model_.empty()) {
    auto found = Find(default_model_);
    if (!found.ok())  // unloaded or removed since: the bare routes have no model now
      return Unavailable("the default model (--default-model) is not served: " +
                         found.status().message());
    return found;
  }
  std::lock_guard lock(mu_);
  for (const auto& [name, entry] : models_)
    if (!entry.versions.empty()) return entry.versions.rbegin()->second;
  return Unavailable("no model is loaded");
}

std::vector<std::shared_ptr<ServedModel>> ModelRegistry::Served() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [name, entry] : models_)
    for (const auto& [v, m] : entry.versions) out.push_back(m);
  return out;
}

size_t ModelRegistry::served_models() const {
  std::lock_guard lock(mu_);
  return std::count_if(models_.begin(), models_.end(),
                       [](const auto& kv) { return !kv.second.versions.empty(); });
}

std::vector<RepositoryEntry> ModelRegistry::Index() const {
  std::vector<std::string> names =
      repository_.empty() ? std::vector<std::string>{} : ModelDirs(repository_);
  std::lock_guard lock(mu_);
  for (const auto& [name, entry] : models_)
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  std::sort(names.begin(), names.end());
  std::vector<RepositoryEntry> out;
  for (const std::string& name : names) {
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      const std::string reason =
          it == models_.end() || it->second.reason.empty() ? "not loaded" : it->second.reason;
      out.push_back({name, "", "UNAVAILABLE", reason});
      continue;
    }
    for (const auto& [v, m] : it->second.versions)
      out.push_back({name, std::to_string(v), "READY", ""});
  }
  return out;
}

Status ModelRegistry::Readiness() const {
  if (!strict_readiness_) return Status::Ok();
  std::lock_guard lock(mu_);
  bool any = false;
  for (const auto& [name, entry] : models_) {
    any |= !entry.versions.empty();
    // A load that failed (unloaded on request, or removed in poll mode, is
    // no failure: the server is not meant to serve it).
    if (entry.versions.empty() && !entry.reason.empty() && entry.reason != "unloaded")
      return Unavailable("not ready: model " + name + " failed to load: " + entry.reason);
  }
  if (!any)
    return Unavailable(
        "not ready: no model is loaded (load one, or serve with --strict-readiness false to be "
        "ready without models)");
  return Status::Ok();
}

void ModelRegistry::CancelQueued(const Status& why) {
  for (const auto& m : Served()) m->scheduler().CancelQueued(why);
}

void ModelRegistry::Shutdown() {
  {
    std::lock_guard lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  for (const auto& m : Served()) m->scheduler().Shutdown();
}

}  // namespace bertrt::serving

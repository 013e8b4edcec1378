#include "server/common/served_model.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "bertrt/plan.h"

namespace bertrt::server {
namespace fs = std::filesystem;

namespace {

// Learns the output layout (names, widths, per token or not) from the engine
// itself, which also warms it up before the first client arrives.
StatusOr<std::vector<OutputSpec>> ProbeOutputs(Scheduler& scheduler, const Tokenizer& tokenizer) {
  ASSIGN_OR_RETURN(Encoding enc, tokenizer.Encode("warm up"));
  InferRequest request;
  request.sequences.push_back({enc.input_ids, enc.token_type_ids});
  request.last_hidden_state = true;
  ASSIGN_OR_RETURN(InferResult result, scheduler.Infer(std::move(request)));
  std::vector<OutputSpec> specs;
  for (const NamedOutput& o : result.outputs.outputs)
    specs.push_back({o.name, o.per_token, o.width});
  return specs;
}

}  // namespace

StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(const std::string& name,
                                                         const std::string& version,
                                                         const std::string& path,
                                                         const ServeOptions& options) {
  ImportOptions import;
  import.on_notice = [&](const std::string& n) {
    std::fprintf(stderr, "notice: %s: %s\n", name.c_str(), n.c_str());
};
ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelAndTokenizer(path, import));
auto m = std::unique_ptr<ServedModel>(new ServedModel());
m->name_ = name;
m->version_ = version;
m->source_ = path;
m->device_ = options.device;
m->precision_ = options.precision;
m->max_input_length_ = loaded.model->config.max_seq_length;
std::vector<std::unique_ptr<Engine>> engines;
for (int i = 0; i < std::max(1, options.instances); ++i) {
  ASSIGN_OR_RETURN(auto engine, options.make_engine(loaded.model));
  engines.push_back(std::move(engine));
}
m->loaded_ = std::move(loaded);
SchedulerOptions scheduling = options.scheduler;
if (options.metrics)
  scheduling.on_batch = [metrics = options.metrics, name](const BatchStats& b) {
    metrics->ObserveBatch(name, b.sequences, b.tokens);
  };
m->scheduler_ = std::make_unique<Scheduler>(std::move(engines), std::move(scheduling));
ASSIGN_OR_RETURN(m->outputs_, ProbeOutputs(*m->scheduler_, *m->loaded_.tokenizer));
return m;
}  // namespace bertrt::server

StatusOr<SequenceInput> ServedModel::Encode(const TextInput& input, bool truncate) const {
  if (input.text.empty())
    return InvalidArgument("empty text: every input needs at least one character");
  const Tokenizer& tok = *loaded_.tokenizer;
  ASSIGN_OR_RETURN(Encoding enc, tok.Encode(input.text, input.text_pair));
  const int n = static_cast<int>(enc.input_ids.size());
  if (n > max_input_length_) {
    if (!truncate)
      return OutOfRange("input is " + std::to_string(n) + " tokens, more than the model's " +
                        std::to_string(max_input_length_) + "; shorten it or set truncate");
    ASSIGN_OR_RETURN(enc, tok.Encode(input.text, input.text_pair, max_input_length_));
  }
  return SequenceInput{std::move(enc.input_ids), std::move(enc.token_type_ids)};
}

const OutputSpec* ServedModel::FindOutput(const std::string& name) const {
  for (const OutputSpec& o : outputs_)
    if (o.name == name) return &o;
  return nullptr;
}

Status ModelRegistry::LoadSingle(const std::string& path, std::string name,
                                 const ServeOptions& options) {
  if (name.empty()) {
    fs::path p = fs::path(path).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    name = IsPlanFile(path) ? p.stem().string() : p.filename().string();
  }
  ASSIGN_OR_RETURN(auto model, ServedModel::Load(name, "1", path, options));
  models_.push_back(std::move(model));
  return Status::Ok();
}

Status ModelRegistry::LoadRepository(const std::string& dir, const ServeOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return NotFound("--model-repository " + dir + ": not a directory");
  std::vector<fs::path> model_dirs;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) model_dirs.push_back(e.path());
  std::sort(model_dirs.begin(), model_dirs.end());
  for (const fs::path& model_dir : model_dirs) {
    long best = -1;
    for (const auto& v : fs::directory_iterator(model_dir, ec)) {
      const std::string s = v.path().filename().string();
      if (v.is_directory() && !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit))
        best = std::max(best, std::stol(s));
    }
    if (best < 0) {
      std::fprintf(stderr, "notice: %s: no numeric version directory; skipped\n",
                   model_dir.string().c_str());
      continue;
    }
    const fs::path version_dir = model_dir / std::to_string(best);
    const fs::path plan = version_dir / "model.plan";
    const std::string path = fs::exists(plan) ? plan.string() : version_dir.string();
    ASSIGN_OR_RETURN(auto model, ServedModel::Load(model_dir.filename().string(),
                                                   std::to_string(best), path, options));
    models_.push_back(std::move(model));
  }
  if (models_.empty())
    return NotFound("--model-repository " + dir + ": no models (expected DIR/<model>/<version>/)");
  return Status::Ok();
}

StatusOr<ServedModel*> ModelRegistry::Find(const std::string& name,
                                           const std::string& version) const {
  std::string served;
  for (const auto& m : models_) {
    if (m->name() == name) {
      if (version.empty() || version == m->version()) return m.get();
      return NotFound("model " + name + " has no version " + version + " (served: " + m->version() +
                      ")");
    }
    served += (served.empty() ? "" : ", ") + m->name();
  }
  return NotFound("unknown model " + name + " (served: " + served + ")");
}

std::vector<ModelRegistry::RepositoryEntry> ModelRegistry::Index() const {
  std::vector<RepositoryEntry> entries;
  for (const auto& m : models_) entries.push_back({m->name(), m->version(), "READY", ""});
  return entries;
}

Status ModelRegistry::Load(const std::string& name) { return Find(name).status(); }

Status ModelRegistry::Unload(const std::string& name) {
  RETURN_IF_ERROR(Find(name).status());
  return FailedPrecondition("model " + name +
                            " cannot be unloaded: this server has no hot reload yet");
}

void ModelRegistry::Shutdown() {
  for (const auto& m : models_) m->scheduler().Shutdown();
}

}  // namespace bertrt::server

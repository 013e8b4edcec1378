#include "server/common/served_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "bertrt/devices.h"
#include "bertrt/plan.h"
#include "core/thread_name.h"
#include "runtime/prompt.h"
#include "server/common/triton_config.h"

namespace bertrt::server {
namespace fs = std::filesystem;

namespace {

// One run through the scheduler before the first client arrives, which warms
// the engines up and holds them to the outputs the server describes (the
// metadata endpoints and the routes read `outputs`, never a run's): an engine
// that returns anything else fails the load rather than a request.
Status WarmUpAndCheckOutputs(Scheduler& scheduler, const Tokenizer& tokenizer,
                             const std::vector<OutputDescription>& outputs) {
  ASSIGN_OR_RETURN(Encoding enc, tokenizer.Encode("warm up"));
  InferRequest request;
  request.sequences.push_back({enc.input_ids, enc.token_type_ids});
  request.last_hidden_state = true;
  ASSIGN_OR_RETURN(InferResult result, scheduler.Infer(std::move(request)));
  auto layout = [](const std::string& name, bool per_token, int width) {
    return name + (per_token ? " per token" : "") + " [" + std::to_string(width) + "]";
  };
  std::string described, returned;
  for (const OutputDescription& o : outputs)
    described += (described.empty() ? "" : ", ") + layout(o.name, o.per_token, o.width);
  for (const NamedOutput& o : result.outputs.outputs)
    returned += (returned.empty() ? "" : ", ") + layout(o.name, o.per_token, o.width);
  if (described != returned)
    return Internal("the engine returns " + returned + " where the model's outputs are " +
                    described + "; please report it with the model's config.json");
  return Status::Ok();
}

// Which GPUs a GPU instance group runs on: `wanted`, or every visible GPU.
StatusOr<std::vector<int>> GroupGpus(const std::vector<int>& wanted, const std::string& where) {
  auto gpus = ListGpus();
  if (!gpus.ok()) return FailedPrecondition(where + ": " + gpus.status().message());
  std::vector<int> out;
  if (wanted.empty()) {
    for (const GpuInfo& g : *gpus) out.push_back(g.index);
    return out;
  }
  for (int gpu : wanted) {
    if (gpu >= static_cast<int>(gpus->size()))
      return InvalidArgument(where + ": GPU " + std::to_string(gpu) +
                             " is not visible; this machine has " + std::to_string(gpus->size()) +
                             " (0.." + std::to_string(gpus->size() - 1) + ")");
    if (std::find(out.begin(), out.end(), gpu) == out.end()) out.push_back(gpu);
  }
  return out;
}

std::string Placement(const std::vector<InstanceSpec>& instances) {
  std::vector<std::pair<std::string, int>> groups;  // in order of first appearance
  for (const InstanceSpec& i : instances) {
    const std::string key = i.Name() + " " + i.precision;
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == key; });
    if (it == groups.end())
      groups.push_back({key, 1});
    else
      ++it->second;
  }
  std::string out;
  for (const auto& [key, n] : groups)
    out += (out.empty() ? "" : ", ") + key + " x" + std::to_string(n);
  return out;
}

// What identifies a version's files and its model's config on disk: sizes
// and modification times, so that a rewritten file triggers a reload.
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
Status WarmUp(const std::vector<WarmupSample>& samples, const ModelConfig& config,
              const SchedulerOptions& limits, const std::vector<std::unique_ptr<Engine>>& engines,
              const std::function<void(const std::string&)>& notice) {
  if (samples.empty()) return Status::Ok();
  const auto start = std::chrono::steady_clock::now();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> random_id(0, config.vocab_size - 1);
  int batches = 0;
  size_t shapes = 0;
  for (const WarmupSample& w : samples) {
    const std::string where = "warm-up sample \"" + w.name + "\"";
    const int last_batch = std::max(w.batch_size, w.up_to_batch_size);
    const int last_length = std::max(w.length, w.up_to_length);
    if (last_length > config.max_seq_length)
      return InvalidArgument(where + ": dims [" + std::to_string(last_length) +
                             "] is longer than the model takes (" +
                             std::to_string(config.max_seq_length) + " tokens)");
    const int64_t tokens = static_cast<int64_t>(w.batch_size) * w.length;
    if (tokens > limits.max_batch_tokens)
      return InvalidArgument(where + ": batch_size x length = " + std::to_string(tokens) +
                             " tokens, more than max_batch_tokens (" +
                             std::to_string(limits.max_batch_tokens) + ")" +
                             (w.is_range() ? " even at the range's smallest batch" : ""));
    if (w.batch_size > limits.max_batch_size)
      return InvalidArgument(where + ": batch_size " + std::to_string(w.batch_size) +
                             " exceeds max_batch_size " + std::to_string(limits.max_batch_size));
    // Each batch is built once and runs on every instance that has not yet
    // run its shape.
    std::vector<std::set<std::string>> seen(engines.size());
    auto run_where_new = [&](const RaggedBatch& batch) -> Status {
      for (size_t i = 0; i < engines.size(); ++i) {
        if (!seen[i].insert(engines[i]->ShapeKey(batch, {})).second) continue;
        for (int c = 0; c < w.count; ++c, ++batches)
          if (auto r = engines[i]->Run(batch, {}); !r.ok())
            return Status(r.status().code(),
                          where + " on " + engines[i]->device() + ": " + r.status().message());
      }
      return Status::Ok();
    };
    for (int b = w.batch_size; b <= std::min(last_batch, limits.max_batch_size); ++b)
      for (int length = w.length; length <= last_length; ++length) {
        if (static_cast<int64_t>(b) * length > limits.max_batch_tokens) break;
        RaggedBatch batch;
        std::vector<int32_t> ids(length, 0);
        const std::vector<int32_t> types(length, 0);
        for (int s = 0; s < b; ++s) {
          if (w.random_ids)
            for (int32_t& id : ids) id = random_id(rng);
          batch.Add(ids, types);
        }
        RETURN_IF_ERROR(run_where_new(batch));
      }
    for (size_t i = 0; i < engines.size(); ++i) {
      shapes += seen[i].size();
      if (const size_t kept = engines[i]->KeptShapes(); kept > 0 && seen[i].size() > kept)
        notice("warning: " + where + " warms " + std::to_string(seen[i].size()) + " shapes on " +
               engines[i]->device() + ", which keeps " + std::to_string(kept) +
               "; the least recently used are prepared again at their next use");
    }
  }
  for (const auto& engine : engines) engine->WaitForBackgroundWork();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  notice("warmed up: " + std::to_string(batches) + " batches of " + std::to_string(samples.size()) +
         " warm-up samples (" + std::to_string(shapes) + " distinct shapes over " +
         std::to_string(engines.size()) + " instances) in " + std::to_string(static_cast<int>(ms)) +
         " ms");
  return Status::Ok();
}

}  // namespace

StatusOr<ModelServing> ResolveServing(const ServeDefaults& d, const ModelConfigFile& c) {
  ModelServing s;
  s.scheduler = d.scheduler;
  SchedulerOptions& sched = s.scheduler;
  if (c.max_batch_size) {
    sched.max_batch_size = *c.max_batch_size;
    // Triton's max_batch_size also caps what one request carries.
    if (sched.max_client_batch_size == 0) sched.max_client_batch_size = *c.max_batch_size;
  }
  if (c.max_batch_tokens) sched.max_batch_tokens = *c.max_batch_tokens;
  if (c.max_queue_delay_us)
    sched.max_queue_delay = std::chrono::microseconds(*c.max_queue_delay_us);
  if (c.max_queue_size) sched.max_queue_size = static_cast<size_t>(*c.max_queue_size);
  if (c.request_timeout_us)
    sched.request_timeout = std::chrono::milliseconds((*c.request_timeout_us + 999) / 1000);
  if (!c.preferred_batch_sizes.empty()) {
    sched.preferred_batch_sizes = c.preferred_batch_sizes;
    std::sort(sched.preferred_batch_sizes.begin(), sched.preferred_batch_sizes.end());
  }
  s.version_policy = c.version_policy.value_or(d.version_policy);
  s.warmups = c.warmups.empty() ? d.warmups : c.warmups;
  s.config = c;

  std::vector<InstanceGroup> groups = c.instance_groups;
  if (groups.empty()) {
    InstanceGroup g;
    g.kind = d.device == "cuda" ? InstanceGroup::Kind::kGpu : InstanceGroup::Kind::kCpu;
    g.count = d.instances;
    g.gpus = d.gpus;
    groups.push_back(g);
  }
  const std::string gpu_precision =
      c.precision.value_or(d.precision.empty() ? "fp16" : d.precision);
  const std::string gelu = c.gelu.value_or(d.gelu);
  // A CPU runs fp32; an explicit other precision on the command line reaches
  // the CPU engine, which says so.
  const std::string cpu_precision =
      d.device == "cpu" && !d.precision.empty() ? d.precision : "fp32";
  for (size_t i = 0; i < groups.size(); ++i) {
    const InstanceGroup& g = groups[i];
    const std::string where = "instance_group " + std::to_string(i + 1);
    bool gpu = g.kind == InstanceGroup::Kind::kGpu;
    if (g.kind == InstanceGroup::Kind::kAuto) {
      auto visible = ListGpus();
      gpu = visible.ok() && !visible->empty();
    }
    if (!gpu) {
      for (int n = 0; n < g.count; ++n) s.instances.push_back({"cpu", 0, cpu_precision, 0, gelu});
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<int> gpus, GroupGpus(g.gpus, where));
    for (int index : gpus)
      for (int n = 0; n < g.count; ++n)
        s.instances.push_back({"cuda", index, gpu_precision, 0, gelu});
  }
  // CPU instances share the cores unless told otherwise.
  const int cpu_instances =
      static_cast<int>(std::count_if(s.instances.begin(), s.instances.end(),
                                     [](const InstanceSpec& i) { return i.device == "cpu"; }));
  int threads = c.threads.value_or(d.threads);
  if (threads == 0 && cpu_instances > 1)
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / cpu_instances);
  for (InstanceSpec& i : s.instances)
    if (i.device == "cpu") i.threads = threads;
  return s;
}

namespace {

// "notice: <model>: <text>" on stderr: what a load did on the user's behalf.
std::function<void(const std::string&)> ModelNotice(const std::string& name) {
  return [name](const std::string& n) {
    std::fprintf(stderr, "notice: %s: %s\n", name.c_str(), n.c_str());
  };
}

}  // namespace

StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(const std::string& name,
                                                         const std::string& version,
                                                         const std::string& path,
                                                         const ModelServing& serving,
                                                         const ServeDefaults& defaults,
                                                         const ImportOptions& import) {
  if (serving.instances.empty()) return InvalidArgument("model " + name + ": no instances");
  ImportOptions import_options = import;
  import_options.on_notice = ModelNotice(name);
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelAndTokenizer(path, import_options));
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Engine>> engines,
                   CreateInstances(name, loaded, serving, defaults));
  return Create(name, version, path, std::move(loaded), std::move(engines), serving, defaults);
}

StatusOr<std::vector<std::unique_ptr<Engine>>> ServedModel::CreateInstances(
    const std::string& name, const LoadedModel& loaded, const ModelServing& serving,
    const ServeDefaults& defaults) {
  const auto notice = ModelNotice(name);
  // CPU instances compute in fp32: an fp16/bf16 plan is widened once for all
  // of them (each would otherwise widen its own copy); GPU instances take the
  // plan's tensors as they are.
  std::shared_ptr<const Model> cpu_model;
  std::optional<EngineSelfCheck> self_check;  // made at the first GPU instance
  std::vector<std::unique_ptr<Engine>> engines;
  for (const InstanceSpec& spec : serving.instances) {
    if (spec.device == "cpu" && !cpu_model) {
      cpu_model = WithFloat32Weights(loaded.model);
      if (cpu_model != loaded.model)
        notice("fp16/bf16 weights widened to fp32 for the CPU instances");
    }
    auto engine = defaults.make_engine(spec.device == "cpu" ? cpu_model : loaded.model, spec);
    if (!engine.ok())
      return Status(engine.status().code(),
                    "instance on " + spec.Name() + ": " + engine.status().message());
    if (spec.device == "cuda" && defaults.self_check) {
      if (!self_check) {
        auto created = EngineSelfCheck::Create(loaded.model, *loaded.tokenizer);
        if (!created.ok())
          return Status(created.status().code(),
                        "model " + name + ": self-check reference: " + created.status().message());
        self_check = std::move(*created);
      }
      ASSIGN_OR_RETURN(const Precision precision, ParsePrecision(spec.precision));
      auto report = self_check->Check(**engine, precision);
      if (!report.ok())
        return Status(report.status().code(), "model " + name + ", instance on " + spec.Name() +
                                                  ": " + report.status().message());
      notice("self-check on " + spec.Name() + " against the CPU engine in fp32 passed (" +
             DescribeReport(*report) + ")");
    }
    engines.push_back(std::move(*engine));
  }
  return engines;
}

StatusOr<std::unique_ptr<ServedModel>> ServedModel::Create(
    const std::string& name, const std::string& version, const std::string& source,
    LoadedModel loaded, std::vector<std::unique_ptr<Engine>> engines, const ModelServing& serving,
    const ServeDefaults& defaults) {
  const auto notice = ModelNotice(name);
  auto m = std::unique_ptr<ServedModel>(new ServedModel());
  m->name_ = name;
  m->version_ = version;
  m->source_ = source;
  m->instances_ = serving.instances;
  m->serving_ = serving;
  m->placement_ = Placement(serving.instances);
  m->max_input_length_ = loaded.model->config.max_seq_length;
  m->auto_truncate_ = defaults.auto_truncate;
  m->max_normalized_chars_ = defaults.max_normalized_chars;
  SchedulerOptions scheduling = serving.scheduler;
  // A plan built for at most N tokens per batch: batches stay within it.
  if (const int limit = loaded.model->max_batch_tokens; limit > 0)
    scheduling.max_batch_tokens = std::min(scheduling.max_batch_tokens, limit);
  if (Status st = WarmUp(serving.warmups, loaded.model->config, scheduling, engines, notice);
      !st.ok())
    return Status(st.code(), "model " + name + ": " + st.message());
  m->loaded_ = std::move(loaded);
  // Triton's execution counts start after the warm-up run below, which is no
  // execution a client asked for.
  auto serving_requests = std::make_shared<std::atomic<bool>>(false);
  if (defaults.metrics) {
    std::vector<std::string> instance_names;
    for (const InstanceSpec& spec : serving.instances) instance_names.push_back(spec.Name());
    scheduling.on_batch = [metrics = defaults.metrics, name, instance_names, serving_requests,
                           statistics = m->statistics_](const BatchStats& b) {
      metrics->ObserveBatch(name, instance_names[b.instance], b.sequences, b.tokens,
                            b.compute_seconds);
      if (b.ok && serving_requests->load())
        statistics->ObserveExecution(b.sequences, b.compute_seconds);
    };
  }
  m->scheduler_ = std::make_unique<Scheduler>(std::move(engines), std::move(scheduling));
  m->outputs_ = DescribeOutputs(*m->loaded_.model);
  RETURN_IF_ERROR(WarmUpAndCheckOutputs(*m->scheduler_, *m->loaded_.tokenizer, m->outputs_));
  // A config.pbtxt's input and output blocks must describe this model.
  RETURN_IF_ERROR(CheckTensorBlocks(serving.config, m->max_input_length_, m->outputs_));
  serving_requests->store(true);
  if (defaults.metrics) {
    m->metrics_ = defaults.metrics;
    m->metrics_->AddModelVersion(name, version, m->statistics_);
  }
  return m;
}

// Finishes the queued work before the engines go; then this load's
// nv_inference_* series go too (Triton's go with its unloaded model).
ServedModel::~ServedModel() {
  if (scheduler_) scheduler_->Shutdown();
  if (metrics_) metrics_->RemoveModelVersion(name_, version_, statistics_.get());
}

namespace {

// The positions a prompt's tokens take (the first pool_start) once the
// first text lost `dropped` tokens from its start: the prompt's went first,
// and pool_start counts only those left, never fewer than the special
// tokens before the text ([CLS]).
StatusOr<int32_t> PoolStartAfterCut(const Tokenizer& tok, const std::string& prompt,
                                    int32_t pool_start, size_t dropped) {
  if (pool_start <= 0 || dropped == 0) return pool_start;
  ASSIGN_OR_RETURN(const Encoding p, tok.Encode(prompt));
  int32_t leading = 0;
  while (leading < pool_start && static_cast<size_t>(leading) < p.sequence_ids.size() &&
         p.sequence_ids[leading] != 0)
    ++leading;
  return static_cast<int32_t>(
      std::max<int64_t>(leading, pool_start - static_cast<int64_t>(dropped)));
}

}  // namespace

StatusOr<SequenceInput> ServedModel::Encode(const TextInput& input, const EncodeOptions& options,
                                            bool* truncated) const {
  // One rule for both texts of a pair (a rerank's documents, text_pair).
  RETURN_IF_ERROR(CheckInputText(input.text));
  if (input.text_pair) RETURN_IF_ERROR(CheckInputText(*input.text_pair));
  const Tokenizer& tok = *loaded_.tokenizer;
  ASSIGN_OR_RETURN(const std::string prompt, config().PromptText(options.prompt_name));
  ASSIGN_OR_RETURN(const int32_t pool_start, PromptPoolStart(config(), tok, prompt));
  // A text without a prompt is tokenized where it is: it may be megabytes.
  const std::string prompted = prompt.empty() ? std::string() : prompt + input.text;
  const std::string_view text = prompt.empty() ? std::string_view(input.text) : prompted;
  const int limit = options.max_length > 0 ? options.max_length : max_input_length_;
  // The tokenizer reads a long text only as far as the limit needs.
  EncodeLimits limits;
  limits.max_length = static_cast<size_t>(limit);
  limits.truncate = options.truncate || auto_truncate_;
  limits.truncate_left = options.truncate_left;
  limits.truncation = options.truncation;
  limits.max_normalized_chars = max_normalized_chars_;
  limits.count_first_text_cut_up_to = static_cast<size_t>(std::max(pool_start, 0));
  EncodeReport report;
  StatusOr<Encoding> enc = tok.Encode(text, input.text_pair, limits, &report);
  if (report.too_long) {
    return OutOfRange(
        (report.exact ? "input is " + std::to_string(report.tokens) +
                            " tokens, more than the model's " + std::to_string(limit)
                      : "input is more than the model's " + std::to_string(limit) + " tokens") +
        options.TooLongHint());
  }
  if (!enc.ok()) return enc.status();
  if (truncated) *truncated = report.truncated;
  ASSIGN_OR_RETURN(const int32_t start,
                   PoolStartAfterCut(tok, prompt, pool_start, report.first_text_cut));
  SequenceInput seq{std::move(enc->input_ids), std::move(enc->token_type_ids), start};
  if (seq.pool_start >= static_cast<int>(seq.input_ids.size()))
    return PromptFillsInput(seq.pool_start, static_cast<int>(seq.input_ids.size()));
  return seq;
}

StatusOr<SequenceInput> ServedModel::EncodeIds(SequenceInput seq,
                                               const EncodeOptions& options) const {
  std::vector<int32_t>& ids = seq.input_ids;
  std::vector<int32_t>& types = seq.token_type_ids;
  if (ids.empty()) return InvalidArgument("an empty list of token ids");
  if (types.empty()) types.assign(ids.size(), 0);
  if (types.size() != ids.size())
    return InvalidArgument(std::to_string(ids.size()) + " token ids but " +
                           std::to_string(types.size()) + " token type ids");
  const ModelConfig& c = config();
  for (int32_t id : ids)
    if (id < 0 || id >= c.vocab_size)
      return InvalidArgument("token id " + std::to_string(id) +
                             " is not in the vocabulary (ids go from 0 to " +
                             std::to_string(c.vocab_size - 1) + ")");
  for (int32_t t : types)
    if (c.takes_token_types && (t < 0 || t >= c.type_vocab_size))
      return InvalidArgument("token type id " + std::to_string(t) + " is not one of the model's " +
                             std::to_string(c.type_vocab_size) + " types");
  const size_t limit =
      static_cast<size_t>(options.max_length > 0 ? options.max_length : max_input_length_);
  if (ids.size() > limit) {
    if (!options.truncate && !auto_truncate_)
      return OutOfRange(std::to_string(ids.size()) + " tokens, more than the model's " +
                        std::to_string(limit) + options.TooLongHint());
    const size_t from = options.truncate_left ? ids.size() - limit : 0;
    ids.assign(ids.begin() + from, ids.begin() + from + limit);
    types.assign(types.begin() + from, types.begin() + from + limit);
  }
  seq.pool_start = 0;
  return seq;
}

RequestTimer::RequestTimer(ServedModel& model, Metrics* metrics, Clock::time_point arrival)
    : model_(model), metrics_(metrics), start_(arrival) {
  record_.parse_seconds = std::chrono::duration<double>(Clock::now() - arrival).count();
}

StatusOr<InferResult> RequestTimer::Infer(InferRequest request) {
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  record_.sequences += static_cast<int>(request.sequences.size());
  record_.input_seconds = since(start_);
  auto result = model_.scheduler().Infer(std::move(request));
  computed_ = Clock::now();
  infer_status_ = result.status();
  if (result.ok()) {
    if (metrics_) metrics_->ObserveRequest(model_.name(), result->queue_seconds,
                                           result->compute_seconds);
    record_.queue_seconds = result->queue_seconds;
    record_.infer_seconds = result->compute_seconds;
  }
  return result;
}

void RequestTimer::Finish(const Status& outcome) {
  const auto now = Clock::now();
  if (ran()) record_.output_seconds = std::chrono::duration<double>(now - computed_).count();
  record_.request_seconds = std::chrono::duration<double>(now - start_).count();
  record_.code = !infer_status_.ok() ? infer_status_.code() : outcome.code();
  model_.statistics().Observe(record_);
  if (metrics_) metrics_->ObserveInference(model_.name(), record_);
}

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
  return abs.parent_path().filename().empty() ? p.stem().string() : FolderModelName(abs.parent_path());
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
  auto config = override_config
                    ? ParseModelConfigJson(config_json, "the load request's config", name)
                    : LoadModelConfig(model_dir.string(), name);
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

}  // namespace bertrt::server

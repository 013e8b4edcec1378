#include "serving/served_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "bertrt/devices.h"
#include "bertrt/self_check.h"
#include "model/prompt.h"

namespace bertrt::serving {

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
  request.run.last_hidden_state = true;
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
      for (int n = 0; n < g.count; ++n) {
        s.instances.push_back({"cpu", 0, cpu_precision, 0, gelu, d.calibration});
      }
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<int> gpus, GroupGpus(g.gpus, where));
    for (int index : gpus)
      for (int n = 0; n < g.count; ++n)
        s.instances.push_back({"cuda", index, gpu_precision, 0, gelu, {}});
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

StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(
    const std::string& name, const std::string& version, const std::string& path,
    const ModelServing& serving, const ServeDefaults& defaults, const ImportOptions& import) {
  if (serving.instances.empty()) return InvalidArgument("model " + name + ": no instances");
  ImportOptions import_options = import;
  import_options.on_notice = ModelNotice(name);
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelAndTokenizer(path, import_options));
  // An 8-bit plan's instances run in its format whatever the default said.
  ModelServing placed = serving;
  for (InstanceSpec& i : placed.instances) i.precision = EffectivePrecision(*loaded.model, i);
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Engine>> engines,
                   CreateInstances(name, loaded, placed, defaults));
  return Create(name, version, path, std::move(loaded), std::move(engines), placed, defaults);
}

StatusOr<std::vector<std::unique_ptr<Engine>>> ServedModel::CreateInstances(
    const std::string& name, const LoadedModel& loaded, const ModelServing& serving,
    const ServeDefaults& defaults) {
  const auto notice = ModelNotice(name);
  // CPU instances compute in fp32: an fp16/bf16 plan is widened once for all
  // of them (each would otherwise widen its own copy); GPU instances take the
  // plan's tensors as they are.
  std::shared_ptr<const Model> cpu_model;
  // 8-bit instances share one quantization per format: each would calibrate
  // alike (on the CPU, from the fp32 weights).
  std::map<QuantFormat, std::shared_ptr<const Model>> quantized;
  std::optional<EngineSelfCheck> self_check;  // made at the first GPU instance
  std::vector<std::unique_ptr<Engine>> engines;
  for (const InstanceSpec& spec : serving.instances) {
    const std::optional<QuantFormat> format = QuantizedFormat(*loaded.model, spec);
    if ((spec.device == "cpu" || format) && !cpu_model) {
      cpu_model = WithFloat32Weights(loaded.model);
      if (cpu_model != loaded.model && spec.device == "cpu")
        notice("fp16/bf16 weights widened to fp32 for the CPU instances");
    }
    if (format && !quantized.count(*format)) {
      ASSIGN_OR_RETURN(quantized[*format],
                       QuantizeModel(cpu_model, *loaded.tokenizer, spec, notice));
    }
    auto engine = defaults.make_engine(format                  ? quantized[*format]
                                       : spec.device == "cpu" ? cpu_model
                                                              : loaded.model,
                                       *loaded.tokenizer, spec);
    if (!engine.ok())
      return Status(engine.status().code(),
                    "instance on " + spec.Name() + ": " + engine.status().message());
    // An 8-bit engine passed its model's check as it was made.
    if (spec.device == "cuda" && defaults.self_check && !format) {
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
  if (defaults.config_source.check_blocks)
    RETURN_IF_ERROR(
        defaults.config_source.check_blocks(serving.config, m->max_input_length_, m->outputs_));
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

RequestTimer::RequestTimer(ServedModel& model, MetricsSink* metrics, Clock::time_point arrival)
    : model_(model), metrics_(metrics), start_(arrival) {
  record_.parse_seconds = std::chrono::duration<double>(Clock::now() - arrival).count();
}

StatusOr<InferResult> RequestTimer::Infer(InferRequest request) {
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  record_.sequences += static_cast<int>(request.sequences.size());
  record_.input_tokens.reserve(record_.input_tokens.size() + request.sequences.size());
  for (const SequenceInput& s : request.sequences)
    record_.input_tokens.push_back(static_cast<int>(s.input_ids.size()));
  record_.input_seconds = since(start_);
  auto result = model_.scheduler().Infer(std::move(request));
  computed_ = Clock::now();
  infer_status_ = result.status();
  if (result.ok()) {
    record_.computed = true;
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

}  // namespace bertrt::serving

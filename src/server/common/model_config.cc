#include "server/common/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "model_config.pb.h"

namespace bertrt::server {
using serving::InstanceGroup;
using serving::ModelConfigFile;
using serving::ParseWarmupShape;
using serving::TensorBlock;
using serving::VersionPolicy;
using serving::WarmupSample;
using serving::InstanceGroup;
using serving::ParseWarmupShape;
using serving::TensorBlock;
using serving::VersionPolicy;
using serving::WarmupSample;
namespace {

namespace pb = google::protobuf;

// Keeps the first error with its (1-based) line and column.
class FirstError : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (message_.empty())
      message_ =
          "line " + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// Every field of Triton's model configuration parses, so a field that does
// not is misspelt or not Triton's.
std::string Hint(const std::string& message) {
  if (message.find("no field named") != std::string::npos)
    return "; not a field of Triton's model configuration (model_config.proto): check its "
           "spelling";
  return "";
}

StatusOr<int> PositiveInt(const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    long v = std::stol(value, &used);
    if (used == value.size() && v > 0 && v <= std::numeric_limits<int>::max())
      return static_cast<int>(v);
  } catch (...) {
  }
  return InvalidArgument("parameters \"" + key + "\": \"" + value + "\" is not a positive integer");
}

Status ReadParameters(const config::ModelConfig& pbc, ModelConfigFile& out) {
  std::vector<std::string> unknown;
  for (const auto& [key, param] : pbc.parameters()) {
    const std::string& value = param.string_value();
    if (key == "precision") {
      if (value != "fp32" && value != "fp16" && value != "bf16")
        return InvalidArgument("parameters \"precision\": \"" + value +
                               "\"; expected fp32, fp16 or bf16");
      out.precision = value;
    } else if (key == "max_batch_tokens") {
      ASSIGN_OR_RETURN(out.max_batch_tokens, PositiveInt(key, value));
    } else if (key == "threads") {
      ASSIGN_OR_RETURN(out.threads, PositiveInt(key, value));
    } else if (key == "gelu") {
      if (value != "tanh" && value != "exact")
        return InvalidArgument("parameters \"gelu\": \"" + value + "\"; expected tanh or exact");
      out.gelu = value;
    } else if (key != "warmup_shapes") {  // ReadWarmups reads it, once max_batch_size is known
      unknown.push_back(key);
    }
  }
  // Another backend's (execution_mode, ...): ignored, named in one line.
  if (!unknown.empty()) {
    std::sort(unknown.begin(), unknown.end());
    std::string keys;
    for (const std::string& key : unknown) keys += (keys.empty() ? "\"" : ", \"") + key + "\"";
    out.ignored.push_back("parameters " + keys +
                          " (not bertrt's: it reads precision, max_batch_tokens, threads, gelu "
                          "and warmup_shapes)");
  }
  return Status::Ok();
}

Status ReadInstanceGroups(const config::ModelConfig& pbc, ModelConfigFile& out) {
  for (int i = 0; i < pbc.instance_group_size(); ++i) {
    const config::ModelInstanceGroup& g = pbc.instance_group(i);
    const std::string where = "instance_group " + std::to_string(i + 1);
    InstanceGroup group;
    switch (g.kind()) {
      case config::ModelInstanceGroup::KIND_AUTO:
        group.kind = InstanceGroup::Kind::kAuto;
        break;
      case config::ModelInstanceGroup::KIND_GPU:
        group.kind = InstanceGroup::Kind::kGpu;
        break;
      case config::ModelInstanceGroup::KIND_CPU:
        group.kind = InstanceGroup::Kind::kCpu;
        break;
      case config::ModelInstanceGroup::KIND_MODEL:  // "the framework places it": bertrt does
        group.kind = InstanceGroup::Kind::kAuto;
        out.ignored.push_back(where +
                              ": kind KIND_MODEL (taken as KIND_AUTO: the GPUs when "
                              "there are any, else the CPU)");
        break;
      default:
        return InvalidArgument(where + ": kind " + config::ModelInstanceGroup::Kind_Name(g.kind()) +
                               " is not supported; use KIND_GPU, KIND_CPU or KIND_AUTO");
    }
    if (g.count() < 0) return InvalidArgument(where + ": count must be positive");
    group.count = g.count() == 0 ? 1 : g.count();
    for (int gpu : g.gpus()) {
      if (gpu < 0) return InvalidArgument(where + ": gpu index " + std::to_string(gpu));
      group.gpus.push_back(gpu);
    }
    if (!group.gpus.empty() && group.kind == InstanceGroup::Kind::kCpu)
      return InvalidArgument(where + ": gpus given for a KIND_CPU group");
    if (!group.gpus.empty()) group.kind = InstanceGroup::Kind::kGpu;
    std::vector<std::string> unused;
    if (g.profile_size() > 0) unused.push_back("profile (TensorRT optimization profiles)");
    if (g.secondary_devices_size() > 0) unused.push_back("secondary_devices");
    if (g.has_rate_limiter()) unused.push_back("rate_limiter");
    if (g.passive()) unused.push_back("passive");
    if (!g.host_policy().empty()) unused.push_back("host_policy");
    for (const std::string& field : unused) out.ignored.push_back(where + ": " + field);
    out.instance_groups.push_back(std::move(group));
  }
  return Status::Ok();
}

Status ReadBatching(const config::ModelConfig& pbc, ModelConfigFile& out) {
  if (pbc.max_batch_size() < 0) return InvalidArgument("max_batch_size must not be negative");
  if (pbc.max_batch_size() > 0) out.max_batch_size = pbc.max_batch_size();
  if (!pbc.has_dynamic_batching()) return Status::Ok();
  const config::ModelDynamicBatching& db = pbc.dynamic_batching();
  for (int size : db.preferred_batch_size()) {
    if (size <= 0) return InvalidArgument("dynamic_batching: preferred_batch_size must be > 0");
    if (out.max_batch_size && size > *out.max_batch_size)
      return InvalidArgument("dynamic_batching: preferred_batch_size " + std::to_string(size) +
                             " exceeds max_batch_size " + std::to_string(*out.max_batch_size));
    out.preferred_batch_sizes.push_back(size);
  }
  if (db.max_queue_delay_microseconds() > 0)
    out.max_queue_delay_us = static_cast<int64_t>(db.max_queue_delay_microseconds());
  const uint32_t policy_size = db.default_queue_policy().max_queue_size();
  if (policy_size > 0 && db.max_queue_size() > 0 && policy_size != db.max_queue_size())
    return InvalidArgument(
        "dynamic_batching: max_queue_size and default_queue_policy.max_queue_size disagree; "
        "set one");
  if (const uint32_t size = policy_size ? policy_size : db.max_queue_size(); size > 0)
    out.max_queue_size = static_cast<int>(std::min<uint32_t>(size, 1 << 30));
  if (db.default_queue_policy().default_timeout_microseconds() > 0)
    out.request_timeout_us =
        static_cast<int64_t>(db.default_queue_policy().default_timeout_microseconds());
  if (db.preserve_ordering())
    out.ignored.push_back(
        "dynamic_batching: preserve_ordering (each request gets its own answer as it is done)");
  if (db.priority_levels() > 0 || db.default_priority_level() > 0 ||
      !db.priority_queue_policy().empty())
    out.ignored.push_back(
        "dynamic_batching: priority levels (bertrt has one queue, first come first served)");
  if (db.default_queue_policy().timeout_action() == config::ModelQueuePolicy::DELAY)
    out.ignored.push_back(
        "dynamic_batching: timeout_action DELAY (a request that times out is rejected)");
  if (db.default_queue_policy().allow_timeout_override())
    out.ignored.push_back("dynamic_batching: allow_timeout_override");
  return Status::Ok();
}

std::vector<int64_t> Dims(const pb::RepeatedField<int64_t>& dims) {
  return {dims.begin(), dims.end()};
}

// Input and output blocks, kept as written for CheckTensorBlocks; their
// fields that concern other engines' tensors are reported as ignored.
void ReadTensorBlocks(const config::ModelConfig& pbc, ModelConfigFile& out) {
  for (const config::ModelInput& in : pbc.input()) {
    TensorBlock block{in.name(),        config::DataType_Name(in.data_type()),
                      Dims(in.dims()),  in.optional(),
                      in.has_reshape(), Dims(in.reshape().shape())};
    const std::string where = "input \"" + in.name() + "\": ";
    if (in.format() != config::ModelInput::FORMAT_NONE)
      out.ignored.push_back(where + "format " + config::ModelInput::Format_Name(in.format()));
    if (in.has_reshape())
      out.ignored.push_back(where + "reshape (bertrt takes the shape the client sends)");
    if (in.is_shape_tensor()) out.ignored.push_back(where + "is_shape_tensor");
    if (in.allow_ragged_batch())
      out.ignored.push_back(where + "allow_ragged_batch (bertrt batches ragged sequences itself)");
    if (in.is_non_linear_format_io()) out.ignored.push_back(where + "is_non_linear_format_io");
    out.inputs.push_back(std::move(block));
  }
  for (const config::ModelOutput& o : pbc.output()) {
    TensorBlock block{o.name(),        config::DataType_Name(o.data_type()),
                      Dims(o.dims()),  false,
                      o.has_reshape(), Dims(o.reshape().shape())};
    const std::string where = "output \"" + o.name() + "\": ";
    if (!o.label_filename().empty())
      out.ignored.push_back(where + "label_filename (bertrt labels classes with config.json's " +
                            "id2label)");
    if (o.has_reshape())
      out.ignored.push_back(where + "reshape (bertrt answers in the shape of dims)");
    if (o.is_shape_tensor()) out.ignored.push_back(where + "is_shape_tensor");
    if (o.is_non_linear_format_io()) out.ignored.push_back(where + "is_non_linear_format_io");
    out.outputs.push_back(std::move(block));
  }
}

// platform and backend of other engines, and the blocks bertrt has no use
// for: listed, not refused, so that a config written for Triton loads as it
// is. An ensemble is refused: it has no model of its own to serve.
Status NoteIgnored(const config::ModelConfig& pbc, ModelConfigFile& out) {
  if (pbc.platform() == "ensemble" || pbc.has_ensemble_scheduling())
    return InvalidArgument(
        "an ensemble (platform \"ensemble\", ensemble_scheduling): bertrt does not run "
        "ensembles; serve the encoder as a model of its own and run the other steps in the "
        "client");
  auto note = [&](std::string what) { out.ignored.push_back(std::move(what)); };
  const std::string own = " (another engine's: bertrt runs the model with its own engine)";
  if (!pbc.platform().empty() && pbc.platform() != "bertrt")
    note("platform \"" + pbc.platform() + "\"" + own);
  if (!pbc.backend().empty() && pbc.backend() != "bertrt")
    note("backend \"" + pbc.backend() + "\"" + own);
  if (!pbc.runtime().empty()) note("runtime \"" + pbc.runtime() + "\"" + own);
  if (pbc.has_optimization())
    note(
        "optimization (another engine's settings; bertrt's are the parameters precision, "
        "max_batch_tokens, threads and gelu)");
  if (pbc.has_sequence_batching())
    note(
        "sequence_batching (encoders keep no state between requests: bertrt batches them "
        "dynamically)");
  if (pbc.batch_input_size() > 0 || pbc.batch_output_size() > 0)
    note("batch_input/batch_output (bertrt batches ragged sequences itself)");
  if (!pbc.default_model_filename().empty() || !pbc.cc_model_filenames().empty())
    note(
        "default_model_filename/cc_model_filenames (bertrt loads each version directory's "
        "model.plan or Hugging Face files)");
  if (!pbc.metric_tags().empty()) note("metric_tags");
  if (pbc.has_model_operations()) note("model_operations (custom operator libraries)");
  if (pbc.model_transaction_policy().decoupled())
    note("model_transaction_policy decoupled (bertrt answers each request once)");
  if (pbc.has_model_repository_agents()) note("model_repository_agents");
  if (pbc.response_cache().enable()) note("response_cache (bertrt has no response cache)");
  if (pbc.has_model_metrics()) note("model_metrics");
  return Status::Ok();
}

Status ReadVersionPolicy(const config::ModelConfig& pbc, ModelConfigFile& out) {
  if (!pbc.has_version_policy()) return Status::Ok();
  const config::ModelVersionPolicy& vp = pbc.version_policy();
  VersionPolicy policy;
  if (vp.has_all()) {
    policy.kind = VersionPolicy::Kind::kAll;
  } else if (vp.has_specific()) {
    policy.kind = VersionPolicy::Kind::kSpecific;
    for (int64_t v : vp.specific().versions()) {
      if (v <= 0) return InvalidArgument("version_policy: versions must be positive");
      policy.versions.push_back(v);
    }
    if (policy.versions.empty())
      return InvalidArgument("version_policy: specific needs at least one version");
  } else {
    policy.kind = VersionPolicy::Kind::kLatest;
    if (vp.has_latest() && vp.latest().num_versions() > 0)
      policy.num_versions = static_cast<int>(std::min<uint32_t>(vp.latest().num_versions(), 1024));
  }
  out.version_policy = std::move(policy);
  return Status::Ok();
}

// model_warmup entries of token inputs (input_ids, with attention_mask and
// token_type_ids alike if given), as Triton users write them for BERT; the
// batch dimension is batch_size, dims the sequence length.
Status ReadWarmups(const config::ModelConfig& pbc, ModelConfigFile& out) {
  for (int i = 0; i < pbc.model_warmup_size(); ++i) {
    const config::ModelWarmup& w = pbc.model_warmup(i);
    WarmupSample sample;
    sample.name = w.name().empty() ? std::to_string(i + 1) : w.name();
    const std::string where = "model_warmup \"" + sample.name + "\"";
    if (w.batch_size() == 0) return InvalidArgument(where + ": batch_size must be at least 1");
    if (out.max_batch_size && static_cast<int>(w.batch_size()) > *out.max_batch_size)
      return InvalidArgument(where + ": batch_size " + std::to_string(w.batch_size()) +
                             " exceeds max_batch_size " + std::to_string(*out.max_batch_size));
    sample.batch_size = static_cast<int>(std::min<uint32_t>(w.batch_size(), 1 << 20));
    sample.count = w.count() == 0 ? 1 : static_cast<int>(std::min<uint32_t>(w.count(), 1000));
    if (w.inputs().count("input_ids") == 0)
      return InvalidArgument(where + ": needs an input_ids input (dims: [sequence length])");
    for (const auto& [input, spec] : w.inputs()) {
      const std::string what = where + " input \"" + input + "\"";
      if (input != "input_ids" && input != "attention_mask" && input != "token_type_ids")
        return InvalidArgument(what +
                               ": bertrt warms up with token inputs: input_ids, "
                               "attention_mask, token_type_ids");
      if (spec.data_type() != config::TYPE_INT32 && spec.data_type() != config::TYPE_INT64)
        return InvalidArgument(what + ": data_type " + config::DataType_Name(spec.data_type()) +
                               "; expected TYPE_INT32 or TYPE_INT64");
      if (spec.dims_size() != 1 || spec.dims(0) <= 0 || spec.dims(0) > (1 << 20))
        return InvalidArgument(what +
                               ": dims must be [sequence length] (the batch dimension is "
                               "batch_size), a positive length");
      const int length = static_cast<int>(spec.dims(0));
      if (sample.length != 0 && length != sample.length)
        return InvalidArgument(what + ": dims differ from the other inputs'");
      sample.length = length;
      if (spec.input_data_type_case() == config::ModelWarmup::Input::kInputDataFile)
        return InvalidArgument(what +
                               ": input_data_file is not supported; use zero_data or "
                               "random_data");
      if (input == "input_ids") sample.random_ids = spec.random_data();
    }
    out.warmups.push_back(std::move(sample));
  }
  // The command line's --warmup-shapes for this model alone (ranges allowed).
  if (auto it = pbc.parameters().find("warmup_shapes"); it != pbc.parameters().end()) {
    const std::string where = "parameters \"warmup_shapes\"";
    if (it->second.string_value().empty())
      return InvalidArgument(where + ": empty; list BATCHxLENGTH shapes, e.g. 1-32x100-192");
    std::stringstream items(it->second.string_value());
    std::string item;
    while (std::getline(items, item, ',')) {
      auto sample = ParseWarmupShape(item);
      if (!sample.ok()) return InvalidArgument(where + ": " + sample.status().message());
      if (out.max_batch_size && sample->batch_size > *out.max_batch_size)
        return InvalidArgument(where + ": \"" + item + "\" starts at batch size " +
                               std::to_string(sample->batch_size) + ", over max_batch_size " +
                               std::to_string(*out.max_batch_size));
      out.warmups.push_back(std::move(*sample));
    }
  }
  return Status::Ok();
}

}  // namespace

namespace {

// A parsed ModelConfig message, from either form, checked and made plain.
StatusOr<ModelConfigFile> ReadModelConfig(const config::ModelConfig& pbc, const std::string& path,
                                          const std::string& model_name) {
  auto fail = [&](const Status& st) { return InvalidArgument(path + ": " + st.message()); };
  if (!pbc.name().empty() && pbc.name() != model_name)
    return InvalidArgument(path + ": name \"" + pbc.name() + "\" differs from the directory \"" +
                           model_name + "\"; make them equal or drop the name");
  ModelConfigFile out;
  out.path = path;
  for (Status st : {NoteIgnored(pbc, out), ReadParameters(pbc, out), ReadInstanceGroups(pbc, out),
                    ReadBatching(pbc, out), ReadVersionPolicy(pbc, out), ReadWarmups(pbc, out)})
    if (!st.ok()) return fail(st);
  ReadTensorBlocks(pbc, out);
  return out;
}

}  // namespace

StatusOr<ModelConfigFile> ParseModelConfig(const std::string& text, const std::string& path,
                                           const std::string& model_name) {
  config::ModelConfig pbc;
  pb::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &pbc))
    return InvalidArgument(path + ": " + errors.message() + Hint(errors.message()));
  return ReadModelConfig(pbc, path, model_name);
}

StatusOr<ModelConfigFile> ParseModelConfigJson(const std::string& text, const std::string& what,
                                               const std::string& model_name) {
  config::ModelConfig pbc;
  const auto parsed = pb::util::JsonStringToMessage(text, &pbc);
  if (!parsed.ok())
    return InvalidArgument(what + ": not a model configuration in Triton's JSON form (" +
                           std::string(parsed.message()) + ")");
  return ReadModelConfig(pbc, what, model_name);
}

StatusOr<ModelConfigFile> LoadModelConfig(const std::string& model_dir,
                                          const std::string& model_name) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "config.pbtxt";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ModelConfigFile{};
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path.string() + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return ParseModelConfig(text.str(), path.string(), model_name);
}

}  // namespace bertrt::server

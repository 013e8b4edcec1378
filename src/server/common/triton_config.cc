#include "server/common/triton_config.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <set>

#include "model_config.pb.h"
#include "server/common/kserve.h"
#include "server/common/model_config.h"

namespace bertrt::server {
using serving::InstanceSpec;
using serving::ModelConfigFile;
using serving::ModelServing;
using serving::ServedModel;
using serving::TensorBlock;
using serving::VersionPolicy;
using nlohmann::json;

namespace {

namespace pb = google::protobuf;

// In an expected shape: any size (a batch, or a text's [N, 1]'s 1 when -1 is
// written), or a sequence length (1 to the model's max_seq_length).
constexpr int64_t kAny = -1;
constexpr int64_t kSeq = -2;

std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i] == kSeq ? -1 : dims[i]);
  return s + "]";
}

bool Matches(const std::vector<int64_t>& full, const std::vector<int64_t>& expected,
             int max_seq_length) {
  if (full.size() != expected.size()) return false;
  for (size_t i = 0; i < full.size(); ++i) {
    const int64_t d = full[i], e = expected[i];
    if (d == -1 || e == kAny) continue;
    if (e == kSeq ? d > max_seq_length : d != e) return false;
  }
  return true;
}

// The dims to write for `expected` (a full shape, batch first).
std::string Suggest(const std::vector<int64_t>& expected, bool batching) {
  std::vector<int64_t> dims(expected.begin() + (batching ? 1 : 0), expected.end());
  std::string s = "dims: [ ";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i] < 0 ? -1 : dims[i]);
  return s + " ]";
}

// One block against the shapes the model takes or returns for that name.
Status CheckBlock(const std::string& what, const TensorBlock& block, bool batching,
                  const std::vector<std::vector<int64_t>>& expected, int max_seq_length) {
  for (int64_t d : block.dims)
    if (d == 0 || d < -1)
      return InvalidArgument(what + " dims " + ShapeString(block.dims) + ": " + std::to_string(d) +
                             " is no size; write -1 (any) or a positive size");
  std::vector<int64_t> full = block.dims;
  if (batching) full.insert(full.begin(), -1);
  for (const auto& shape : expected)
    if (Matches(full, shape, max_seq_length)) return Status::Ok();
  std::string shapes;
  for (const auto& shape : expected) shapes += (shapes.empty() ? "" : " or ") + ShapeString(shape);
  return InvalidArgument(
      what + " dims " + ShapeString(block.dims) +
      (batching ? " (with max_batch_size > 0 the batch dimension is left out: " +
                      ShapeString(full) + " with it)"
                : " (max_batch_size 0: the batch dimension included)") +
      " do not match the model's " + shapes + ", batch first" +
      (std::find(expected[0].begin(), expected[0].end(), kSeq) != expected[0].end()
           ? " (sequence lengths: -1 or at most " + std::to_string(max_seq_length) + ")"
           : "") +
      "; write " + Suggest(expected[0], batching));
}

bool IsTextInput(const std::string& name) { return name == "text" || name == "text_pair"; }
bool IsIdInput(const std::string& name) {
  return name == "input_ids" || name == "attention_mask" || name == "token_type_ids";
}

std::vector<int64_t> OutputShape(const OutputDescription& o) {
  if (!o.per_token) return {kAny, o.width};
  if (o.width == 1) return {kAny, kSeq};
  return {kAny, kSeq, o.width};
}

}  // namespace

Status CheckTensorBlocks(const ModelConfigFile& config, int max_seq_length,
                         const std::vector<OutputDescription>& outputs) {
  const bool batching = config.max_batch_size.has_value();
  const std::string file = config.path.empty() ? "config.pbtxt" : config.path;
  std::set<std::string> seen;
  for (const TensorBlock& in : config.inputs) {
    const std::string what = file + ": input \"" + in.name + "\"";
    if (!seen.insert("input " + in.name).second)
      return InvalidArgument(what + " is declared twice; keep one block");
    if (IsTextInput(in.name)) {
      if (in.data_type != "TYPE_STRING")
        return InvalidArgument(what + ": data_type " + in.data_type +
                               " does not match the model, which takes texts as TYPE_STRING; "
                               "write data_type: TYPE_STRING");
      RETURN_IF_ERROR(CheckBlock(what, in, batching, {{kAny}, {kAny, 1}}, max_seq_length));
    } else if (IsIdInput(in.name)) {
      if (in.data_type != "TYPE_INT32" && in.data_type != "TYPE_INT64")
        return InvalidArgument(what + ": data_type " + in.data_type +
                               " does not match the model, which takes token ids as "
                               "TYPE_INT32 or TYPE_INT64; write data_type: TYPE_INT64");
      RETURN_IF_ERROR(CheckBlock(what, in, batching, {{kAny, kSeq}}, max_seq_length));
    } else {
      return InvalidArgument(what +
                             ": the model takes no such input; bertrt takes text [+ text_pair] "
                             "(TYPE_STRING) or input_ids [+ attention_mask, token_type_ids] "
                             "(TYPE_INT32 or TYPE_INT64): rename the block to one of these");
    }
  }
  for (const TensorBlock& out : config.outputs) {
    const std::string what = file + ": output \"" + out.name + "\"";
    if (!seen.insert("output " + out.name).second)
      return InvalidArgument(what + " is declared twice; keep one block");
    const OutputDescription* spec = FindOutput(outputs, out.name);
    if (!spec) {
      std::string names;
      for (const OutputDescription& o : outputs) names += (names.empty() ? "" : ", ") + o.name;
      return InvalidArgument(what + ": the model returns no such output; it returns " + names +
                             ": rename the block to one of these");
    }
    if (out.data_type != "TYPE_FP32")
      return InvalidArgument(what + ": data_type " + out.data_type +
                             " does not match the model, which answers TYPE_FP32 (in every "
                             "precision); write data_type: TYPE_FP32");
    RETURN_IF_ERROR(CheckBlock(what, out, batching, {OutputShape(*spec)}, max_seq_length));
  }
  return Status::Ok();
}

namespace {

config::DataType TritonType(const std::string& datatype) {
  if (datatype == "BYTES") return config::TYPE_STRING;
  config::DataType type = config::TYPE_INVALID;
  config::DataType_Parse("TYPE_" + datatype, &type);
  return type;
}

// A block as the config gave it.
template <typename Block>
void Fill(const TensorBlock& b, Block& out) {
  out.set_name(b.name);
  config::DataType type = config::TYPE_INVALID;
  config::DataType_Parse(b.data_type, &type);
  out.set_data_type(type);
  for (int64_t d : b.dims) out.add_dims(d);
  if (b.has_reshape)
    for (int64_t d : b.reshape) out.mutable_reshape()->add_shape(d);
}

// A block from the model's KServe shape (batch first).
template <typename Block>
void Fill(const TensorMetadata& t, bool batching, Block& out) {
  out.set_name(t.name);
  out.set_data_type(TritonType(t.datatype));
  if (!batching) {
    for (int64_t d : t.shape) out.add_dims(d);
  } else if (t.shape.size() == 1) {
    out.add_dims(1);  // [N] texts are also taken as [N, 1]
  } else {
    for (size_t i = 1; i < t.shape.size(); ++i) out.add_dims(t.shape[i]);
  }
}

// Proto3's JSON writes 64-bit integers as strings; Triton writes numbers.
void Int64AsNumbers(const pb::Descriptor& type, json& j) {
  if (!j.is_object()) return;
  for (auto& [key, value] : j.items()) {
    const pb::FieldDescriptor* field = type.FindFieldByName(key);
    if (!field) continue;
    if (field->is_map()) {
      const pb::FieldDescriptor* v = field->message_type()->FindFieldByName("value");
      if (v->message_type())
        for (auto& [k, item] : value.items()) Int64AsNumbers(*v->message_type(), item);
      continue;
    }
    auto fix = [&](json& item) {
      if (field->message_type()) {
        Int64AsNumbers(*field->message_type(), item);
      } else if (item.is_string() && (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64 ||
                                      field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT64)) {
        item = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64
                   ? json(std::stoll(item.get<std::string>()))
                   : json(std::stoull(item.get<std::string>()));
      }
    };
    if (value.is_array()) {
      for (json& item : value) fix(item);
    } else {
      fix(value);
    }
  }
}

}  // namespace

serving::ModelConfigSource TritonConfigSource() {
  return {LoadModelConfig, ParseModelConfigJson, CheckTensorBlocks};
}

void FillModelConfig(const ServedModel& model, config::ModelConfig& out) {
  const ModelServing& serving = model.serving();
  const ModelConfigFile& file = serving.config;
  const SchedulerOptions& sched = model.scheduler().options();
  out.set_name(model.name());
  out.set_platform("bertrt_" + model.device());  // as the model metadata names it
  out.set_backend("bertrt");

  const VersionPolicy& vp = serving.version_policy;
  switch (vp.kind) {
    case VersionPolicy::Kind::kLatest:
      out.mutable_version_policy()->mutable_latest()->set_num_versions(vp.num_versions);
      break;
    case VersionPolicy::Kind::kAll:
      out.mutable_version_policy()->mutable_all();
      break;
    case VersionPolicy::Kind::kSpecific:
      for (int64_t v : vp.versions)
        out.mutable_version_policy()->mutable_specific()->add_versions(v);
      break;
  }

  // A config's own blocks keep its convention: without max_batch_size their
  // dims hold the batch dimension, and max_batch_size stays 0.
  const bool own_blocks = !file.inputs.empty() || !file.outputs.empty();
  const bool batching = !own_blocks || file.max_batch_size.has_value();
  out.set_max_batch_size(batching ? sched.max_batch_size : 0);
  if (!file.inputs.empty()) {
    for (const TensorBlock& b : file.inputs) {
      config::ModelInput* in = out.add_input();
      Fill(b, *in);
      in->set_optional(b.optional);
    }
  } else {
    for (const TensorMetadata& t : InputMetadata()) {
      config::ModelInput* in = out.add_input();
      Fill(t, batching, *in);
      in->set_optional(t.optional);
    }
  }
  if (!file.outputs.empty()) {
    for (const TensorBlock& b : file.outputs) Fill(b, *out.add_output());
  } else {
    for (const TensorMetadata& t : OutputMetadata(model)) Fill(t, batching, *out.add_output());
  }

  config::ModelDynamicBatching* db = out.mutable_dynamic_batching();
  for (int size : sched.preferred_batch_sizes) db->add_preferred_batch_size(size);
  db->set_max_queue_delay_microseconds(static_cast<uint64_t>(sched.max_queue_delay.count()));
  const auto queue_size = static_cast<uint32_t>(std::min<size_t>(sched.max_queue_size, 1u << 30));
  db->mutable_default_queue_policy()->set_max_queue_size(queue_size);
  db->set_max_queue_size(queue_size);
  db->mutable_default_queue_policy()->set_default_timeout_microseconds(
      static_cast<uint64_t>(sched.request_timeout.count()) * 1000);

  // One group for the CPU instances, one per GPU with its instances.
  std::vector<std::pair<std::string, int>> groups;  // (instance name, count), in order
  for (const InstanceSpec& i : model.instances()) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == i.Name(); });
    if (it == groups.end())
      groups.push_back({i.Name(), 1});
    else
      ++it->second;
  }
  for (const auto& [name, count] : groups) {
    config::ModelInstanceGroup* g = out.add_instance_group();
    g->set_name(model.name() + "_" + std::to_string(out.instance_group_size() - 1));
    g->set_count(count);
    if (name == "cpu") {
      g->set_kind(config::ModelInstanceGroup::KIND_CPU);
    } else {
      g->set_kind(config::ModelInstanceGroup::KIND_GPU);
      g->add_gpus(std::stoi(name.substr(name.find(':') + 1)));
    }
  }

  auto parameter = [&](const std::string& key, const std::string& value) {
    (*out.mutable_parameters())[key].set_string_value(value);
  };
  const auto& instances = model.instances();
  auto gpu = std::find_if(instances.begin(), instances.end(),
                          [](const InstanceSpec& i) { return i.device == "cuda"; });
  parameter("precision", gpu != instances.end() ? gpu->precision : instances.front().precision);
  parameter("max_batch_tokens", std::to_string(sched.max_batch_tokens));
  if (gpu != instances.end()) parameter("gelu", gpu->gelu);
  auto cpu = std::find_if(instances.begin(), instances.end(),
                          [](const InstanceSpec& i) { return i.device == "cpu"; });
  if (cpu != instances.end() && cpu->threads > 0)
    parameter("threads", std::to_string(cpu->threads));
}

StatusOr<json> ModelConfigJson(const ServedModel& model) {
  config::ModelConfig message;
  FillModelConfig(model, message);
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (auto st = pb::util::MessageToJsonString(message, &text, options); !st.ok())
    return Internal("model " + model.name() +
                    ": its configuration does not convert to JSON: " + std::string(st.message()));
  json j = json::parse(text);
  Int64AsNumbers(*config::ModelConfig::descriptor(), j);
  return j;
}

}  // namespace bertrt::server

#include "server/common/kserve.h"

#include <algorithm>

#include "core/json_float.h"

namespace bertrt::server {
using nlohmann::json;

namespace {

// KServe allows `data` flat or nested to the shape; both become flat here.
void Flatten(const json& j, std::vector<const json*>& out) {
  if (j.is_array()) {
    for (const json& e : j) Flatten(e, out);
  } else {
    out.push_back(&j);
  }
}

struct Tensor {
  std::string name, datatype;
  std::vector<int64_t> shape;
  std::vector<const json*> data;
};

StatusOr<Tensor> DecodeTensor(const json& j) {
  if (!j.is_object()) return InvalidArgument("each input must be an object");
  Tensor t;
  auto name = j.find("name"), dtype = j.find("datatype"), shape = j.find("shape"),
       data = j.find("data");
  if (name == j.end() || !name->is_string()) return InvalidArgument("an input has no \"name\"");
  t.name = name->get<std::string>();
  const std::string where = "input \"" + t.name + "\": ";
  if (dtype == j.end() || !dtype->is_string())
    return InvalidArgument(where + "missing \"datatype\"");
  t.datatype = dtype->get<std::string>();
  if (shape == j.end() || !shape->is_array()) return InvalidArgument(where + "missing \"shape\"");
  int64_t count = 1;
  for (const json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return InvalidArgument(where + "shape must hold non-negative integers");
    t.shape.push_back(d.get<int64_t>());
    count *= t.shape.back();
  }
  if (data == j.end())
    return InvalidArgument(where + "missing \"data\" (binary tensors are not supported)");
  Flatten(*data, t.data);
  if (static_cast<int64_t>(t.data.size()) != count)
    return InvalidArgument(where + "shape holds " + std::to_string(count) +
                           " elements but data has " + std::to_string(t.data.size()));
  return t;
}

StatusOr<std::vector<std::string>> Strings(const Tensor& t) {
  const std::string where = "input \"" + t.name + "\": ";
  if (t.datatype != "BYTES")
    return InvalidArgument(where + "datatype must be BYTES, got " + t.datatype);
  const bool column = t.shape.size() == 2 && t.shape[1] == 1;
  if (t.shape.size() != 1 && !column) return InvalidArgument(where + "shape must be [N] or [N, 1]");
  std::vector<std::string> out;
  for (const json* v : t.data) {
    if (!v->is_string()) return InvalidArgument(where + "every element must be a string");
    out.push_back(v->get<std::string>());
  }
  return out;
}

StatusOr<std::vector<int64_t>> Ints(const Tensor& t, const std::vector<int64_t>& shape) {
  const std::string where = "input \"" + t.name + "\": ";
  if (t.datatype != "INT32" && t.datatype != "INT64")
    return InvalidArgument(where + "datatype must be INT32 or INT64, got " + t.datatype);
  if (t.shape.size() != 2) return InvalidArgument(where + "shape must be [N, S]");
  if (!shape.empty() && t.shape != shape)
    return InvalidArgument(where + "shape must equal input_ids' shape");
  std::vector<int64_t> out;
  for (const json* v : t.data) {
    if (!v->is_number_integer()) return InvalidArgument(where + "every element must be an integer");
    const int64_t x = v->get<int64_t>();
    if (x < INT32_MIN || x > INT32_MAX)
      return InvalidArgument(where + "value " + std::to_string(x) + " is out of range");
    out.push_back(x);
  }
  return out;
}

Status DecodeIds(const std::vector<Tensor>& inputs, KServeRequest& r) {
  const Tensor *ids = nullptr, *mask = nullptr, *types = nullptr;
  for (const Tensor& t : inputs) {
    if (t.name == "input_ids")
      ids = &t;
    else if (t.name == "attention_mask")
      mask = &t;
    else if (t.name == "token_type_ids")
      types = &t;
    else
      return InvalidArgument("unknown input \"" + t.name + "\" next to input_ids");
  }
  if (!ids) return InvalidArgument("input_ids is missing");
  ASSIGN_OR_RETURN(std::vector<int64_t> id_data, Ints(*ids, {}));
  std::vector<int64_t> mask_data, type_data;
  if (mask) {
    ASSIGN_OR_RETURN(mask_data, Ints(*mask, ids->shape));
  }
  if (types) {
    ASSIGN_OR_RETURN(type_data, Ints(*types, ids->shape));
  }
  const int64_t n = ids->shape[0], s = ids->shape[1];
  r.padded_len = static_cast<int>(s);
  for (int64_t i = 0; i < n; ++i) {
    SequenceInput seq;
    std::vector<int> kept;
    for (int64_t k = 0; k < s; ++k) {
      const size_t at = static_cast<size_t>(i * s + k);
      if (mask && mask_data[at] == 0) continue;
      seq.input_ids.push_back(static_cast<int32_t>(id_data[at]));
      seq.token_type_ids.push_back(types ? static_cast<int32_t>(type_data[at]) : 0);
      kept.push_back(static_cast<int>(k));
    }
    r.sequences.push_back(std::move(seq));
    r.positions.push_back(std::move(kept));
  }
  return Status::Ok();
}

Status DecodeTexts(const std::vector<Tensor>& inputs, KServeRequest& r) {
  std::vector<std::string> texts, pairs;
  bool has_pair = false;
  for (const Tensor& t : inputs) {
    if (t.name == "text") {
      ASSIGN_OR_RETURN(texts, Strings(t));
    } else if (t.name == "text_pair") {
      ASSIGN_OR_RETURN(pairs, Strings(t));
      has_pair = true;
    } else {
      return InvalidArgument("unknown input \"" + t.name + "\" next to text");
    }
  }
  if (has_pair && pairs.size() != texts.size())
    return InvalidArgument("text_pair must have as many elements as text");
  for (size_t i = 0; i < texts.size(); ++i) {
    TextInput in{texts[i], std::nullopt};
    if (has_pair) in.text_pair = pairs[i];
    r.texts.push_back(std::move(in));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<KServeRequest> DecodeKServeRequest(const json& body) {
  if (!body.is_object()) return InvalidArgument("the body must be a JSON object with \"inputs\"");
  KServeRequest r;
  if (auto id = body.find("id"); id != body.end() && id->is_string()) r.id = id->get<std::string>();
  auto inputs = body.find("inputs");
  if (inputs == body.end() || !inputs->is_array() || inputs->empty())
    return InvalidArgument("\"inputs\" must be a non-empty array");
  std::vector<Tensor> tensors;
  bool texts = false;
  for (const json& j : *inputs) {
    ASSIGN_OR_RETURN(Tensor t, DecodeTensor(j));
    texts |= t.name == "text";
    tensors.push_back(std::move(t));
  }
  RETURN_IF_ERROR(texts ? DecodeTexts(tensors, r) : DecodeIds(tensors, r));
  if (r.texts.empty() && r.sequences.empty()) return InvalidArgument("the batch is empty (N = 0)");
  if (auto outs = body.find("outputs"); outs != body.end()) {
    if (!outs->is_array()) return InvalidArgument("\"outputs\" must be an array");
    for (const json& o : *outs) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        return InvalidArgument("each requested output needs a \"name\"");
      r.outputs.push_back(o["name"].get<std::string>());
    }
  }
  if (auto params = body.find("parameters"); params != body.end() && params->is_object()) {
    auto t = params->find("truncate");
    if (t != params->end() && t->is_boolean()) r.truncate = t->get<bool>();
  }
  return r;
}

Status CheckRequestedOutputs(const KServeRequest& request, const ServedModel& model) {
  for (const std::string& name : request.outputs)
    if (!model.FindOutput(name)) return InvalidArgument("unknown output \"" + name + "\"");
  return Status::Ok();
}

namespace {

std::vector<int64_t> OutputShape(const OutputSpec& o, int64_t n, int64_t s) {
  if (!o.per_token) return {n, o.width};
  if (o.width == 1) return {n, s};
  return {n, s, o.width};
}

json EncodeOutput(const NamedOutput& o, const KServeRequest& request, const InferResult& result) {
  const int64_t n = static_cast<int64_t>(result.cu_seqlens.size()) - 1;
  int64_t s = request.padded_len;
  if (!request.texts.empty())
    for (int64_t i = 0; i < n; ++i)
      s = std::max<int64_t>(s, result.cu_seqlens[i + 1] - result.cu_seqlens[i]);
  json data = json::array();
  if (!o.per_token) {
    for (float v : o.data) data.push_back(FloatJson(v));
  } else {
    std::vector<float> padded(static_cast<size_t>(n * s * o.width), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int begin = result.cu_seqlens[i], len = result.cu_seqlens[i + 1] - begin;
      for (int t = 0; t < len; ++t) {
        const int64_t pos = request.texts.empty() ? request.positions[i][t] : t;
        std::copy_n(o.data.begin() + static_cast<size_t>(begin + t) * o.width, o.width,
                    padded.begin() + static_cast<size_t>((i * s + pos) * o.width));
      }
    }
    for (float v : padded) data.push_back(FloatJson(v));
  }
  const OutputSpec spec{o.name, o.per_token, o.width};
  return json{{"name", o.name},
              {"datatype", "FP32"},
              {"shape", OutputShape(spec, n, s)},
              {"data", std::move(data)}};
}

}  // namespace

json EncodeKServeResponse(const KServeRequest& request, const ServedModel& model,
                          const InferResult& result) {
  json outputs = json::array();
  for (const NamedOutput& o : result.outputs.outputs) {
    const bool requested = request.outputs.empty()
                               ? o.name != "last_hidden_state"
                               : std::find(request.outputs.begin(), request.outputs.end(),
                                           o.name) != request.outputs.end();
    if (requested) outputs.push_back(EncodeOutput(o, request, result));
  }
  json r{{"model_name", model.name()},
         {"model_version", model.version()},
         {"outputs", std::move(outputs)}};
  if (!request.id.empty()) r["id"] = request.id;
  return r;
}

json ModelMetadata(const ServedModel& model) {
  json inputs = json::array({
      {{"name", "text"}, {"datatype", "BYTES"}, {"shape", {-1}}},
      {{"name", "text_pair"}, {"datatype", "BYTES"}, {"shape", {-1}}, {"optional", true}},
      {{"name", "input_ids"}, {"datatype", "INT64"}, {"shape", {-1, -1}}},
      {{"name", "attention_mask"}, {"datatype", "INT64"}, {"shape", {-1, -1}}, {"optional", true}},
      {{"name", "token_type_ids"}, {"datatype", "INT64"}, {"shape", {-1, -1}}, {"optional", true}},
  });
  json outputs = json::array();
  for (const OutputSpec& o : model.outputs()) {
    std::vector<int64_t> shape = OutputShape(o, -1, -1);
    outputs.push_back({{"name", o.name}, {"datatype", "FP32"}, {"shape", shape}});
  }
  return json{{"name", model.name()},
              {"versions", {model.version()}},
              {"platform", std::string("bertrt_") + model.device()},
              {"inputs", std::move(inputs)},
              {"outputs", std::move(outputs)}};
}

}  // namespace bertrt::server

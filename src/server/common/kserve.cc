#include "server/common/kserve.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <numeric>

#include "core/json_float.h"

namespace bertrt::server {
using serving::EncodeOptions;
using serving::RequestTimer;
using serving::ServedModel;
using serving::TextInput;
using nlohmann::json;

// Raw tensor bytes are little-endian on the wire; the hosts bertrt runs on are too.
static_assert(std::endian::native == std::endian::little);

namespace {

std::string Where(const std::string& input) { return "input \"" + input + "\": "; }

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Bytes per element of the fixed-size KServe datatypes; 0 for BYTES or unknown.
size_t ElementSize(const std::string& datatype) {
  if (datatype == "BOOL" || datatype == "INT8" || datatype == "UINT8") return 1;
  if (datatype == "INT16" || datatype == "UINT16" || datatype == "FP16" || datatype == "BF16")
    return 2;
  if (datatype == "INT32" || datatype == "UINT32" || datatype == "FP32") return 4;
  if (datatype == "INT64" || datatype == "UINT64" || datatype == "FP64") return 8;
  return 0;
}

}  // namespace

StatusOr<int64_t> ElementCount(const std::vector<int64_t>& shape, const std::string& input) {
  // Any real request is far below this; it only keeps the product from overflowing.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(Where(input) + "shape must hold non-negative integers");
    if (d > 0 && count > kMaxElements / d)
      return InvalidArgument(Where(input) + "shape holds too many elements");
    count *= d;
  }
  return count;
}

Status DecodeRawTensor(std::string_view raw, InputTensor& t) {
  ASSIGN_OR_RETURN(const int64_t count, ElementCount(t.shape, t.name));
  if (t.datatype == "BYTES") {
    // Each element: a 4-byte little-endian length, then that many bytes.
    size_t at = 0;
    while (at < raw.size()) {
      // 4 bytes can make an empty element: stop at the shape's count, not at
      // the bytes' end (8 MB of zero lengths would be 2M strings).
      if (static_cast<int64_t>(t.strings.size()) == count)
        return InvalidArgument(Where(t.name) + "the data has more BYTES elements than shape's " +
                               std::to_string(count));
      uint32_t len = 0;
      if (raw.size() - at < sizeof(len))
        return InvalidArgument(Where(t.name) + "BYTES data ends inside an element's length");
      std::memcpy(&len, raw.data() + at, sizeof(len));
      at += sizeof(len);
      if (raw.size() - at < len)
        return InvalidArgument(Where(t.name) + "a BYTES element of " + std::to_string(len) +
                               " bytes runs past the end of the tensor's data");
      t.strings.emplace_back(raw.substr(at, len));
      at += len;
    }
    if (static_cast<int64_t>(t.strings.size()) != count)
      return InvalidArgument(Where(t.name) + "shape holds " + std::to_string(count) +
                             " elements but the data has " + std::to_string(t.strings.size()));
    return Status::Ok();
  }
  const size_t size = ElementSize(t.datatype);
  if (size == 0) return InvalidArgument(Where(t.name) + "unknown datatype " + t.datatype);
  if (raw.size() != static_cast<size_t>(count) * size)
    return InvalidArgument(Where(t.name) + "shape holds " + std::to_string(count) + " " +
                           t.datatype + " elements (" + std::to_string(count * size) +
                           " bytes) but the data has " + std::to_string(raw.size()) + " bytes");
  if (t.datatype == "INT32") {
    t.ints.resize(static_cast<size_t>(count));
    for (size_t i = 0; i < t.ints.size(); ++i) {
      int32_t v;
      std::memcpy(&v, raw.data() + i * 4, 4);
      t.ints[i] = v;
    }
  } else if (t.datatype == "INT64") {
    t.ints.resize(static_cast<size_t>(count));
    std::memcpy(t.ints.data(), raw.data(), raw.size());
  }
  return Status::Ok();
}

namespace {

StatusOr<std::vector<std::string>> Strings(const InputTensor& t) {
  if (t.datatype != "BYTES")
    return InvalidArgument(Where(t.name) + "datatype must be BYTES, got " + t.datatype);
  const bool column = t.shape.size() == 2 && t.shape[1] == 1;
  if (t.shape.size() != 1 && !column)
    return InvalidArgument(Where(t.name) + "shape must be [N] or [N, 1], got " +
                           ShapeString(t.shape));
  return t.strings;
}

StatusOr<std::vector<int64_t>> Ints(const InputTensor& t, const std::vector<int64_t>& shape) {
  if (t.datatype != "INT32" && t.datatype != "INT64")
    return InvalidArgument(Where(t.name) + "datatype must be INT32 or INT64, got " + t.datatype);
  if (t.shape.size() != 2)
    return InvalidArgument(Where(t.name) + "shape must be [N, S], got " + ShapeString(t.shape));
  if (!shape.empty() && t.shape != shape)
    return InvalidArgument(Where(t.name) + "shape must equal input_ids' shape " +
                           ShapeString(shape) + ", got " + ShapeString(t.shape));
  for (int64_t x : t.ints)
    if (x < INT32_MIN || x > INT32_MAX)
      return InvalidArgument(Where(t.name) + "value " + std::to_string(x) + " is out of range");
  return t.ints;
}

Status AssembleIds(const std::vector<InputTensor>& inputs, KServeRequest& r) {
  const InputTensor *ids = nullptr, *mask = nullptr, *types = nullptr;
  for (const InputTensor& t : inputs) {
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

Status AssembleTexts(const std::vector<InputTensor>& inputs, KServeRequest& r) {
  std::vector<std::string> texts, pairs;
  bool has_pair = false;
  for (const InputTensor& t : inputs) {
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

Status AssembleKServeRequest(const std::vector<InputTensor>& inputs,
                             const SchedulerOptions& batching, KServeRequest& r) {
  if (inputs.empty()) return InvalidArgument("the request has no inputs");
  // Rows are allocated from the shape, not from the data: [10000000, 0] with
  // no data at all made 10M empty rows (issue 44, D3).
  for (const InputTensor& t : inputs) {
    for (int64_t d : t.shape)
      if (d < 1)
        return InvalidArgument(Where(t.name) + "shape " + ShapeString(t.shape) +
                               " has a dimension below 1; every dimension must be at least 1");
    if (!t.shape.empty())
      if (Status st = batching.CheckClientBatch(static_cast<size_t>(t.shape[0])); !st.ok())
        return Status(st.code(), Where(t.name) + st.message());
  }
  auto has = [&](const char* name) {
    return std::any_of(inputs.begin(), inputs.end(),
                       [&](const InputTensor& t) { return t.name == name; });
  };
  const bool texts = has("text");
  // Every input is optional on its own (InputMetadata); one of these two must be there.
  if (!texts && !has("input_ids")) {
    std::string names;
    for (const InputTensor& t : inputs) names += (names.empty() ? "\"" : ", \"") + t.name + "\"";
    return InvalidArgument(
        "the request needs text [+ text_pair] or input_ids [+ attention_mask, token_type_ids]; "
        "it has " +
        names);
  }
  return texts ? AssembleTexts(inputs, r) : AssembleIds(inputs, r);
}

namespace {

// KServe allows `data` flat or nested to the shape; both become flat here.
void Flatten(const json& j, std::vector<const json*>& out) {
  if (j.is_array()) {
    for (const json& e : j) Flatten(e, out);
  } else {
    out.push_back(&j);
  }
}

Status JsonElements(const json& data, int64_t count, InputTensor& t) {
  std::vector<const json*> flat;
  Flatten(data, flat);
  if (static_cast<int64_t>(flat.size()) != count)
    return InvalidArgument(Where(t.name) + "shape holds " + std::to_string(count) +
                           " elements but data has " + std::to_string(flat.size()));
  if (t.datatype == "BYTES") {
    for (const json* v : flat) {
      if (!v->is_string()) return InvalidArgument(Where(t.name) + "every element must be a string");
      t.strings.push_back(v->get<std::string>());
    }
  } else if (t.datatype == "INT32" || t.datatype == "INT64") {
    for (const json* v : flat) {
      if (!v->is_number_integer())
        return InvalidArgument(Where(t.name) + "every element must be an integer");
      if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX})
        return InvalidArgument(Where(t.name) + "value " + v->dump() + " is out of range");
      t.ints.push_back(v->get<int64_t>());
    }
  }
  return Status::Ok();
}

// One input object; with parameters.binary_data_size its data is the next
// that many bytes of `binary` (from `offset`, which it advances).
StatusOr<InputTensor> JsonInput(const json& j, std::string_view binary, size_t& offset) {
  if (!j.is_object()) return InvalidArgument("each input must be an object");
  InputTensor t;
  auto name = j.find("name"), dtype = j.find("datatype"), shape = j.find("shape"),
       data = j.find("data");
  if (name == j.end() || !name->is_string()) return InvalidArgument("an input has no \"name\"");
  t.name = name->get<std::string>();
  if (dtype == j.end() || !dtype->is_string())
    return InvalidArgument(Where(t.name) + "missing \"datatype\"");
  t.datatype = dtype->get<std::string>();
  if (shape == j.end() || !shape->is_array())
    return InvalidArgument(Where(t.name) + "missing \"shape\"");
  for (const json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return InvalidArgument(Where(t.name) + "shape must hold non-negative integers");
    t.shape.push_back(d.get<int64_t>());
  }
  ASSIGN_OR_RETURN(const int64_t count, ElementCount(t.shape, t.name));
  const json* size = nullptr;
  if (auto params = j.find("parameters"); params != j.end() && params->is_object())
    if (auto s = params->find("binary_data_size"); s != params->end()) size = &*s;
  if (size) {
    if (!size->is_number_integer() || (!size->is_number_unsigned() && size->get<int64_t>() < 0))
      return InvalidArgument(Where(t.name) + "parameters.binary_data_size must be a byte count");
    const uint64_t bytes = size->get<uint64_t>();
    if (bytes > binary.size() - offset)
      return InvalidArgument(Where(t.name) + "binary_data_size " + std::to_string(bytes) +
                             " runs past the end of the body's binary data (" +
                             std::to_string(binary.size() - offset) +
                             " bytes left); check Inference-Header-Content-Length");
    RETURN_IF_ERROR(DecodeRawTensor(binary.substr(offset, bytes), t));
    offset += bytes;
    return t;
  }
  if (data == j.end())
    return InvalidArgument(Where(t.name) +
                           "missing \"data\" (or parameters.binary_data_size with binary data)");
  RETURN_IF_ERROR(JsonElements(*data, count, t));
  return t;
}

bool BoolParameter(const json& object, const char* key, bool fallback) {
  auto params = object.find("parameters");
  if (params == object.end() || !params->is_object()) return fallback;
  auto v = params->find(key);
  return v != params->end() && v->is_boolean() ? v->get<bool>() : fallback;
}

}  // namespace

StatusOr<KServeRequest> DecodeKServeRequest(const json& body, const SchedulerOptions& batching,
                                            std::string_view binary) {
  if (!body.is_object()) return InvalidArgument("the body must be a JSON object with \"inputs\"");
  KServeRequest r;
  if (auto id = body.find("id"); id != body.end() && id->is_string()) r.id = id->get<std::string>();
  auto inputs = body.find("inputs");
  if (inputs == body.end() || !inputs->is_array() || inputs->empty())
    return InvalidArgument("\"inputs\" must be a non-empty array");
  std::vector<InputTensor> tensors;
  size_t offset = 0;
  for (const json& j : *inputs) {
    ASSIGN_OR_RETURN(InputTensor t, JsonInput(j, binary, offset));
    tensors.push_back(std::move(t));
  }
  if (offset != binary.size())
    return InvalidArgument("the body has " + std::to_string(binary.size()) +
                           " bytes of binary data but the inputs' binary_data_size add up to " +
                           std::to_string(offset) + "; check Inference-Header-Content-Length");
  RETURN_IF_ERROR(AssembleKServeRequest(tensors, batching, r));
  if (auto outs = body.find("outputs"); outs != body.end()) {
    if (!outs->is_array()) return InvalidArgument("\"outputs\" must be an array");
    for (const json& o : *outs) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        return InvalidArgument("each requested output needs a \"name\"");
      RequestedOutput out{o["name"].get<std::string>(), std::nullopt};
      if (auto p = o.find("parameters"); p != o.end() && p->is_object()) {
        if (auto b = p->find("binary_data"); b != p->end() && b->is_boolean())
          out.binary = b->get<bool>();
        if (auto c = p->find("classification"); c != p->end()) {
          if (!c->is_number_integer() || (!c->is_number_unsigned() && c->get<int64_t>() < 0))
            return InvalidArgument("output \"" + out.name +
                                   "\": parameters.classification must be a count of classes "
                                   "(an integer, 0 for the values themselves)");
          out.class_count = c->get<int64_t>();
        }
      }
      r.outputs.push_back(std::move(out));
    }
  }
  r.truncate = BoolParameter(body, "truncate", false);
  r.binary_output = BoolParameter(body, "binary_data_output", false);
  return r;
}

Status CheckRequestedOutputs(const KServeRequest& request, const ServedModel& model) {
  for (const RequestedOutput& o : request.outputs)
    if (!model.FindOutput(o.name))
      return InvalidArgument("unknown output \"" + o.name + "\"; the model returns " + [&] {
        std::string names;
        for (const OutputDescription& s : model.outputs())
          names += (names.empty() ? "" : ", ") + s.name;
        return names;
      }());
  return Status::Ok();
}

namespace {

// Whether the request returns any per-token output.
bool ReturnsPerToken(const KServeRequest& request, const ServedModel& model) {
  if (request.outputs.empty())
    return std::any_of(model.outputs().begin(), model.outputs().end(),
                       [](const OutputDescription& o) { return o.per_token && !o.on_request; });
  return std::any_of(request.outputs.begin(), request.outputs.end(),
                     [&](const RequestedOutput& o) { return model.FindOutput(o.name)->per_token; });
}

// Per-token outputs span the positions the tokens run take, not the length
// the client declared: [1, 200000] ids cut to 512 answered 200,000 rows of
// zeros, a 307 MB answer to a 1 MB request (issue 44, D4). For ids, a row's
// last position run is where the mask put its last token kept; S must stay
// within the model's max length, so that no mask can make the answer larger
// than a full-length batch's.
Status SizePerTokenOutputs(KServeRequest& request, const ServedModel& model,
                           const std::vector<SequenceInput>& sequences) {
  if (request.texts.empty()) {
    int span = 0;
    for (size_t i = 0; i < sequences.size(); ++i) {
      const size_t run = sequences[i].input_ids.size();
      span = std::max(span, request.positions[i][run - 1] + 1);
    }
    request.padded_len = span;
  }
  if (request.padded_len > model.max_input_length() && ReturnsPerToken(request, model))
    return InvalidArgument(
        "attention_mask keeps a token at position " + std::to_string(request.padded_len - 1) +
        ", past the model's max length " + std::to_string(model.max_input_length()) +
        ": per-token outputs are as wide as the last position run; pad on the right, or send "
        "rows no longer than the model takes");
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<OutputTensor>> InferKServe(serving::Infer& infer, KServeRequest& request) {
  const ServedModel& model = infer.model();
  RETURN_IF_ERROR(CheckRequestedOutputs(request, model));
  EncodeOptions options;
  options.truncate = request.truncate;  // a cut of token ids keeps each row's first tokens
  ASSIGN_OR_RETURN(std::vector<SequenceInput> sequences, infer.Encode(request.texts, options));
  std::vector<serving::ModelInput> rows;
  for (SequenceInput& seq : request.sequences)
    rows.push_back({std::nullopt, std::move(seq.input_ids), std::move(seq.token_type_ids)});
  request.sequences.clear();
  ASSIGN_OR_RETURN(std::vector<SequenceInput> ids, infer.Encode(std::move(rows), options));
  for (SequenceInput& seq : ids) sequences.push_back(std::move(seq));
  RETURN_IF_ERROR(SizePerTokenOutputs(request, model, sequences));
  bool hidden_states = false;
  for (const RequestedOutput& o : request.outputs)
    hidden_states |= model.FindOutput(o.name)->on_request;
  ASSIGN_OR_RETURN(InferResult result,
                   infer.Run(std::move(sequences), {.last_hidden_state = hidden_states}));
  return SelectOutputs(request, model, result);
}

namespace {

// n sequences of (per token) s positions; width-1 outputs per token have no width dimension.
std::vector<int64_t> OutputShape(bool per_token, int width, int64_t n, int64_t s) {
  if (!per_token) return {n, width};
  if (width == 1) return {n, s};
  return {n, s, width};
}

OutputTensor MakeOutput(const NamedOutput& o, const KServeRequest& request,
                        const InferResult& result) {
  const int64_t n = static_cast<int64_t>(result.cu_seqlens.size()) - 1;
  int64_t s = request.padded_len;
  if (!request.texts.empty())
    for (int64_t i = 0; i < n; ++i)
      s = std::max<int64_t>(s, result.cu_seqlens[i + 1] - result.cu_seqlens[i]);
  OutputTensor t;
  t.name = o.name;
  t.shape = OutputShape(o.per_token, o.width, n, s);
  if (!o.per_token) {
    t.data = o.data;
    return t;
  }
  t.data.assign(static_cast<size_t>(n * s * o.width), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int begin = result.cu_seqlens[i], len = result.cu_seqlens[i + 1] - begin;
    for (int k = 0; k < len; ++k) {
      const int64_t pos = request.texts.empty() ? request.positions[i][k] : k;
      std::copy_n(o.data.begin() + static_cast<size_t>(begin + k) * o.width, o.width,
                  t.data.begin() + static_cast<size_t>((i * s + pos) * o.width));
    }
  }
  return t;
}

// Triton's classification of each row (batch item) of `values`: its top k
// values over all of the row's elements, largest first (the earlier index
// on a tie), as "value:index", with ":label" where the index is a class of
// the model's classifier (a sequence classifier's logits).
OutputTensor Classify(OutputTensor values, int64_t class_count, const ServedModel& model) {
  const int64_t rows = values.shape[0];
  const int64_t per_row = rows ? static_cast<int64_t>(values.data.size()) / rows : 0;
  const int64_t k = std::min(class_count, per_row);
  const bool labelled = model.config().head == HeadKind::kSequenceClassification &&
                        values.name == "logits" && per_row == model.config().num_labels;
  OutputTensor out;
  out.name = std::move(values.name);
  out.datatype = "BYTES";
  out.shape = {rows, k};
  out.binary = values.binary;
  std::vector<int64_t> order(static_cast<size_t>(per_row));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = values.data.data() + r * per_row;
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = order[static_cast<size_t>(j)];
      std::string entry = std::to_string(row[i]) + ":" + std::to_string(i);
      if (labelled) entry += ":" + model.config().LabelName(static_cast<int>(i));
      out.strings.push_back(std::move(entry));
    }
  }
  return out;
}

}  // namespace

std::vector<OutputTensor> SelectOutputs(const KServeRequest& request, const ServedModel& model,
                                        const InferResult& result) {
  std::vector<OutputTensor> out;
  for (const NamedOutput& o : result.outputs.outputs) {
    const RequestedOutput* asked = nullptr;
    for (const RequestedOutput& r : request.outputs)
      if (r.name == o.name) asked = &r;
    // Unasked, last_hidden_state is left out: it is large and rarely wanted.
    if (request.outputs.empty() ? o.name == kLastHiddenState : !asked) continue;
    OutputTensor t = MakeOutput(o, request, result);
    t.binary = asked && asked->binary ? *asked->binary : request.binary_output;
    if (asked && asked->class_count > 0) t = Classify(std::move(t), asked->class_count, model);
    out.push_back(std::move(t));
  }
  return out;
}

std::string RawTensorBytes(const OutputTensor& t) {
  if (t.datatype != "BYTES")
    return std::string(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  std::string raw;
  for (const std::string& e : t.strings) {
    const uint32_t len = static_cast<uint32_t>(e.size());
    raw.append(reinterpret_cast<const char*>(&len), sizeof(len));
    raw += e;
  }
  return raw;
}

HttpAnswer EncodeKServeResponse(const KServeRequest& request, const ServedModel& model,
                                const std::vector<OutputTensor>& outputs) {
  // Written straight: an answer is mostly floats, which a tree would convert
  // three times each. Strings through nlohmann, replacing (never throwing
  // on) invalid UTF-8 echoed back (the id).
  auto str = [](const std::string& s) {
    return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  HttpAnswer answer;
  std::string& out = answer.body;
  std::string binary;
  out = "{";
  if (!request.id.empty()) {
    out += "\"id\":";
    out += str(request.id);
    out += ',';
  }
  out += "\"model_name\":";
  out += str(model.name());
  out += ",\"model_version\":";
  out += str(model.version());
  out += ",\"outputs\":[";
  for (size_t k = 0; k < outputs.size(); ++k) {
    const OutputTensor& o = outputs[k];
    if (k) out += ',';
    out += "{\"name\":";
    out += str(o.name);
    out += ",\"datatype\":";
    out += str(o.datatype);
    out += ",\"shape\":";
    out += json(o.shape).dump();
    if (o.binary) {
      const std::string raw = RawTensorBytes(o);
      out += ",\"parameters\":{\"binary_data_size\":";
      out += std::to_string(raw.size());
      out += '}';
      binary += raw;
    } else if (o.datatype == "BYTES") {
      out += ",\"data\":";
      out += json(o.strings).dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      out += ",\"data\":";
      AppendJsonFloats(out, o.data.data(), o.data.size());
    }
    out += '}';
  }
  out += "]}";
  bool any_binary =
      std::any_of(outputs.begin(), outputs.end(), [](const OutputTensor& o) { return o.binary; });
  if (any_binary) {
    answer.header_length = answer.body.size();
    answer.body += binary;
  }
  return answer;
}

StatusOr<std::string> LoadConfigParameter(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& parameters) {
  std::string config;
  for (const auto& [key, value] : parameters) {
    if (key == "config" && value) {
      config = *value;
    } else if (key.rfind("file:", 0) == 0) {
      return InvalidArgument("parameter \"" + key +
                             "\": model files are not taken in a load request; put them in "
                             "the model repository and load the model by name");
    } else {
      return InvalidArgument("parameter \"" + key +
                             "\" is not taken by a load request (\"config\", a string of "
                             "Triton's JSON model configuration, is)");
    }
  }
  return config;
}

// Every input is optional in Triton's sense (a request may leave it out): a
// request holds text [+ text_pair] or input_ids [+ attention_mask,
// token_type_ids], so no input is required by itself; which sets go together
// AssembleKServeRequest checks.
std::vector<TensorMetadata> InputMetadata() {
  return {
      {"text", "BYTES", {-1}, true},
      {"text_pair", "BYTES", {-1}, true},
      {"input_ids", "INT64", {-1, -1}, true},
      {"attention_mask", "INT64", {-1, -1}, true},
      {"token_type_ids", "INT64", {-1, -1}, true},
  };
}

std::vector<TensorMetadata> OutputMetadata(const ServedModel& model) {
  std::vector<TensorMetadata> out;
  for (const OutputDescription& o : model.outputs())
    out.push_back({o.name, "FP32", OutputShape(o.per_token, o.width, -1, -1), false});
  return out;
}

json ModelMetadata(const ServedModel& model) {
  json inputs = json::array(), outputs = json::array();
  for (const TensorMetadata& t : InputMetadata()) {
    json j{{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}};
    if (t.optional) j["optional"] = true;
    inputs.push_back(std::move(j));
  }
  for (const TensorMetadata& t : OutputMetadata(model))
    outputs.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  return json{{"name", model.name()},
              {"versions", {model.version()}},
              {"platform", std::string("bertrt_") + model.device()},
              {"inputs", std::move(inputs)},
              {"outputs", std::move(outputs)}};
}

}  // namespace bertrt::server

#include "builder/plan_layout.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <type_traits>

#include "builder/plan_format.h"
#include "model/config_bounds.h"
#include "model/model_check.h"

namespace bertrt::plan {
namespace {

using nlohmann::json;

Status Missing(const std::string& key, const char* what) {
  return InvalidArgument("metadata: \"" + key + "\" is missing or not " + what);
}

Status GetInt(const json& j, const std::string& key, int64_t lo, int64_t hi, int* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return Missing(key, "an integer");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return OutOfRange("metadata: \"" + key + "\" is " + std::to_string(v) + ", outside [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status GetString(const json& j, const std::string& key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return Missing(key, "a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

Status GetBool(const json& j, const std::string& key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return Missing(key, "a boolean");
  *out = it->get<bool>();
  return Status::Ok();
}

// Maps a name back to its enum value through the enum's own Name function.
template <typename E, typename Values, typename NameFn>
Status GetEnum(const json& j, const std::string& key, const Values& values, NameFn name, E* out) {
  std::string s;
  RETURN_IF_ERROR(GetString(j, key, &s));
  for (E v : values)
    if (s == name(v)) {
      *out = v;
      return Status::Ok();
    }
  return InvalidArgument("metadata: \"" + key + "\" has an unknown value \"" + s + "\"");
}

constexpr std::initializer_list<HiddenAct> kHiddenActs = {HiddenAct::kGelu, HiddenAct::kGeluTanh,
                                                          HiddenAct::kRelu};
constexpr std::initializer_list<DenseActivation> kDenseActivations = {
    DenseActivation::kIdentity, DenseActivation::kTanh, DenseActivation::kRelu,
    DenseActivation::kGelu, DenseActivation::kSigmoid};

}  // namespace

std::vector<TensorSpec> ExpectedTensors(const ModelConfig& c, bool has_pooler,
                                        bool untied_decoder) {
  const std::vector<model::WeightGroup> schema = model::WeightSchema(c, has_pooler, untied_decoder);
  std::vector<TensorSpec> specs;
  for (const model::WeightGroup& g : schema) {
    const bool linear = model::IsEncoderLinear(g.role);
    for (size_t i = 0; i < g.tensors.size(); ++i) {
      const model::WeightTensor& t = g.tensors[i];
      if (t.stored)
        specs.push_back({t.name, t.shape, t.in_compute_precision, t.parts, linear && i == 0});
    }
  }
  return specs;
}

DType StoredDType(Precision precision, bool in_compute_precision) {
  return in_compute_precision ? PrecisionDType(precision) : DType::kF32;
}

namespace {

json PoolingNames(const std::vector<Pooling>& modes) {
  json names = json::array();
  for (Pooling p : modes) names.push_back(PoolingName(p));
  return names;
}

constexpr std::initializer_list<Pooling> kPoolings = {Pooling::kCls,          Pooling::kMean,
                                                      Pooling::kMax,          Pooling::kMeanSqrtLen,
                                                      Pooling::kWeightedMean, Pooling::kLastToken};

}  // namespace

json DenseToJson(const std::vector<DenseSpec>& dense) {
  json out = json::array();
  for (const DenseSpec& d : dense)
    out.push_back({{"in_features", d.in_features},
                   {"out_features", d.out_features},
                   {"bias", d.bias},
                   {"activation", DenseActivationName(d.activation)}});
  return out;
}

namespace {

// One field of ModelConfig as a plan's "config" object holds it: how it is
// written, and how it is read back from untrusted JSON (presence, type,
// range). ConfigFromJson reads the fields in the table's order: a field's
// bounds may depend on those before it.
struct ConfigField {
  std::string key;
  // Absent in plans written before the field existed: the default stays.
  bool optional = false;
  std::function<json(const ModelConfig&)> write;
  std::function<Status(const json& config, const std::string& key, ModelConfig*)> read;
};

constexpr bool kOptional = true;

// An int field, read within its bounds (model/config_bounds.h).
ConfigField Int(const char* key, bool optional = false) {
  const model::IntBound& b = model::IntBoundOf(key);
  return {key, optional, [&b](const ModelConfig& c) { return json(c.*b.field); },
          [&b](const json& j, const std::string& key, ModelConfig* c) {
            return GetInt(j, key, b.lo, b.hi(*c), &(c->*b.field));
          }};
}

// A field stored as its own JSON value, read back by `get` (GetBool, GetString).
template <typename T>
ConfigField Plain(std::string key, T ModelConfig::*field,
                  Status (*get)(const json&, const std::string&, T*), bool optional) {
  return {std::move(key), optional, [field](const ModelConfig& c) { return json(c.*field); },
          [field, get](const json& j, const std::string& key, ModelConfig* c) {
            return get(j, key, &(c->*field));
          }};
}
ConfigField Bool(std::string key, bool ModelConfig::*field, bool optional = false) {
  return Plain(std::move(key), field, GetBool, optional);
}
ConfigField String(std::string key, std::string ModelConfig::*field, bool optional = false) {
  return Plain(std::move(key), field, GetString, optional);
}

template <typename E, typename NameFn>
ConfigField Enum(std::string key, E ModelConfig::*field,
                 std::type_identity_t<std::vector<E>> values, NameFn name, bool optional = false) {
  return {std::move(key), optional,
          [field, name](const ModelConfig& c) { return json(name(c.*field)); },
          [field, values, name](const json& j, const std::string& key, ModelConfig* c) {
            return GetEnum(j, key, values, name, &(c->*field));
          }};
}

// A float field, read as a double within its bounds first (converting an
// out-of-range double to float is undefined behaviour).
ConfigField Float(const char* key, bool optional = false) {
  const model::FloatBound& b = model::FloatBoundOf(key);
  return {key, optional, [&b](const ModelConfig& c) { return json(c.*b.field); },
          [&b](const json& j, const std::string& key, ModelConfig* c) -> Status {
            auto it = j.find(key);
            if (it == j.end() || !it->is_number() || !b.in_range(it->get<double>()))
              return Missing(key, (std::string("a number in ") + b.range).c_str());
            c->*b.field = static_cast<float>(it->get<double>());
            return Status::Ok();
          }};
}

// "pooling": a name (plans written before concatenated modes) or a list.
Status ReadPooling(const json& j, const std::string& key, ModelConfig* c) {
  auto it = j.find(key);
  if (it == j.end()) return Missing(key, "a pooling mode or a list of them");
  const json& value = *it;
  const json list = value.is_string() ? json::array({value}) : value;
  if (!list.is_array() || list.empty() || list.size() > 16)
    return Missing(key, "a pooling mode or a list of 1 to 16");
  c->pooling_modes.clear();
  for (const json& name : list) {
    Pooling p = Pooling::kMean;
    RETURN_IF_ERROR(GetEnum(json{{key, name}}, key, kPoolings, PoolingName, &p));
    c->pooling_modes.push_back(p);
  }
  return Status::Ok();
}

// Each Dense module's input is the width before it (the pooled width first).
Status ReadDense(const json& j, const std::string& key, ModelConfig* c) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() > 16) return Missing(key, "a list of 0 to 16");
  const json& dense = *it;
  int width = c->pooled_width();
  for (const json& d : dense) {
    if (!d.is_object()) return Missing(key, "a list of objects");
    DenseSpec spec;
    RETURN_IF_ERROR(GetInt(d, "in_features", width, width, &spec.in_features));
    RETURN_IF_ERROR(GetInt(d, "out_features", 1, 1 << 20, &spec.out_features));
    RETURN_IF_ERROR(GetBool(d, "bias", &spec.bias));
    RETURN_IF_ERROR(
        GetEnum(d, "activation", kDenseActivations, DenseActivationName, &spec.activation));
    width = spec.out_features;
    c->dense.push_back(spec);
  }
  return Status::Ok();
}

Status ReadPrompts(const json& j, const std::string& key, ModelConfig* c) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return Missing(key, "a list of [name, text] pairs");
  const json& prompts = *it;
  for (const json& p : prompts) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      return Missing(key, "a list of [name, text] pairs");
    c->prompts.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  }
  return Status::Ok();
}

Status ReadLabels(const json& j, const std::string& key, ModelConfig* c) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return Missing(key, "an array");
  const json& labels = *it;
  if (!labels.empty() && labels.size() != static_cast<size_t>(c->num_labels))
    return InvalidArgument("metadata: " + std::to_string(labels.size()) + " labels for " +
                           std::to_string(c->num_labels) + " classes");
  for (const json& l : labels) {
    if (!l.is_string()) return Missing(key, "an array of strings");
    c->labels.push_back(l.get<std::string>());
  }
  return Status::Ok();
}

// Every field a plan stores, in reading order. The optional ones arrived
// with a family or a feature (RoBERTa's position offset, SPLADE, ModernBERT,
// sentence-transformers' Dense modules and prompts); plans written before
// them are read with the defaults, which are what those plans ran.
const std::vector<ConfigField>& ConfigFields() {
  using C = ModelConfig;
  static const std::vector<ConfigField> fields = {
      String("architecture", &C::architecture),
      String("model_type", &C::model_type),
      Int("vocab_size"),
      Int("hidden_size"),
      Int("num_layers"),
      Int("num_heads"),
      Int("intermediate_size"),
      Int("max_position_embeddings"),
      Int("type_vocab_size"),
      Int("pad_token_id"),
      Int("num_labels"),
      Int("position_offset", kOptional),
      Bool("takes_token_types", &C::takes_token_types, kOptional),
      Enum("pooler_activation", &C::pooler_activation, kDenseActivations, DenseActivationName,
           kOptional),
      Int("relative_attention_buckets", kOptional),
      Enum("mlm_activation", &C::mlm_activation, kHiddenActs, HiddenActName, kOptional),
      Bool("splade_sum", &C::splade_sum, kOptional),
      Bool("splade_log1p_twice", &C::splade_log1p_twice, kOptional),
      Bool("pre_norm", &C::pre_norm, kOptional),
      Bool("gated_ffn", &C::gated_ffn, kOptional),
      Bool("classifier_mean_pooling", &C::classifier_mean_pooling, kOptional),
      Bool("prediction_head", &C::prediction_head, kOptional),
      Float("rope_theta", kOptional),
      Float("local_rope_theta", kOptional),
      Int("local_window", kOptional),
      Int("global_attention_every", kOptional),
      Int("max_seq_length"),
      Float("layer_norm_eps"),
      Enum("hidden_act", &C::hidden_act, kHiddenActs, HiddenActName),
      Enum("head", &C::head,
           {HeadKind::kBase, HeadKind::kSequenceClassification, HeadKind::kTokenClassification,
            HeadKind::kQuestionAnswering, HeadKind::kSentenceEmbedding, HeadKind::kSparseEmbedding},
           HeadKindName),
      {"pooling", false, [](const C& c) { return PoolingNames(c.pooling_modes); }, ReadPooling},
      {"dense", kOptional, [](const C& c) { return DenseToJson(c.dense); }, ReadDense},
      Int("truncate_dim", kOptional),
      {"prompts", kOptional, [](const C& c) { return json(c.prompts); }, ReadPrompts},
      String("default_prompt_name", &C::default_prompt_name, kOptional),
      Bool("include_prompt", &C::include_prompt, kOptional),
      Bool("normalize", &C::normalize),
      {"labels", false, [](const C& c) { return json(c.labels); }, ReadLabels},
  };
  return fields;
}

}  // namespace

json ConfigToJson(const ModelConfig& c) {
  json j = json::object();
  for (const ConfigField& f : ConfigFields()) j[f.key] = f.write(c);
  return j;
}

StatusOr<ModelConfig> ConfigFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("metadata: \"config\" is not an object");
  ModelConfig c;
  // A required field that is absent: its reader says what it takes.
  for (const ConfigField& f : ConfigFields())
    if (!f.optional || j.contains(f.key)) RETURN_IF_ERROR(f.read(j, f.key, &c));
  // What no one field decides.
  RETURN_IF_ERROR(model::CheckConfigBounds(c, "metadata"));
  if (!c.default_prompt_name.empty() && !c.PromptText(std::nullopt).ok())
    return InvalidArgument("metadata: default_prompt_name is not one of the prompts");
  if (HasClassifier(c.head) && c.head != HeadKind::kQuestionAnswering && c.num_labels == 0)
    return InvalidArgument("metadata: a classification head needs num_labels > 0");
  return c;
}

json SettingsToJson(const TokenizerSettings& s) {
  json j = {{"clean_text", s.clean_text},
            {"handle_chinese_chars", s.handle_chinese_chars},
            {"lowercase", s.lowercase},
            {"unk_token", s.unk_token},
            {"continuing_subword_prefix", s.continuing_subword_prefix},
            {"max_input_chars_per_word", s.max_input_chars_per_word},
            {"cls_token", s.cls_token},
            {"sep_token", s.sep_token},
            {"pad_token", s.pad_token},
            {"mask_token", s.mask_token}};
  j["strip_accents"] = s.strip_accents ? json(*s.strip_accents) : json();
  return j;
}

StatusOr<TokenizerSettings> SettingsFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("metadata: tokenizer \"settings\" is not an object");
  TokenizerSettings s;
  RETURN_IF_ERROR(GetBool(j, "clean_text", &s.clean_text));
  RETURN_IF_ERROR(GetBool(j, "handle_chinese_chars", &s.handle_chinese_chars));
  RETURN_IF_ERROR(GetBool(j, "lowercase", &s.lowercase));
  RETURN_IF_ERROR(GetString(j, "unk_token", &s.unk_token));
  RETURN_IF_ERROR(GetString(j, "continuing_subword_prefix", &s.continuing_subword_prefix));
  RETURN_IF_ERROR(GetInt(j, "max_input_chars_per_word", 0, 1 << 30, &s.max_input_chars_per_word));
  RETURN_IF_ERROR(GetString(j, "cls_token", &s.cls_token));
  RETURN_IF_ERROR(GetString(j, "sep_token", &s.sep_token));
  RETURN_IF_ERROR(GetString(j, "pad_token", &s.pad_token));
  RETURN_IF_ERROR(GetString(j, "mask_token", &s.mask_token));
  auto strip = j.find("strip_accents");
  if (strip == j.end() || !(strip->is_null() || strip->is_boolean()))
    return Missing("strip_accents", "a boolean or null");
  if (strip->is_boolean()) s.strip_accents = strip->get<bool>();
  return s;
}

std::optional<QuantFormat> QuantizedPlanFormat(const std::string& precision) {
  if (precision == kInt8Precision) return QuantFormat::kInt8;
  if (precision == kFp8Precision) return QuantFormat::kFp8;
  return std::nullopt;
}
std::string ScalesSection(const std::string& weight) { return weight + ".scales"; }
std::string SmoothingSection(const std::string& weight) { return weight + ".smoothing"; }
std::string CheckSection(QuantFormat format, const std::string& what) {
  return std::string(QuantFormatName(format)) + "_check." + what;
}

json ReportToJson(const QuantizationReport& r) {
  json kept = json::array(), outputs = json::array();
  for (const auto& [name, score] : r.kept_fp32) kept.push_back({name, score});
  for (const OutputAccuracy& a : r.outputs)
    outputs.push_back({{"output", a.output},
                       {"rows", a.rows},
                       {"cosine_mean", a.cosine_mean},
                       {"cosine_mean_stderr", a.cosine_mean_stderr},
                       {"cosine_min", a.cosine_min},
                       {"max_abs_error", a.max_abs_error},
                       {"argmax_agreement", a.argmax_agreement},
                       {"top10_overlap", a.top10_overlap}});
  const AccuracyBudget& b = r.budget;
  return json{{"precision", r.precision},
              {"calibration", r.calibration},
              {"calibration_sequences", r.calibration_sequences},
              {"held_out_sequences", r.held_out_sequences},
              {"quantized_linears", r.quantized_linears},
              {"linears", r.linears},
              {"kept_fp32", kept},
              {"unsupported", r.unsupported},
              {"outputs", outputs},
              {"budget",
               {{"cosine_mean", b.cosine_mean},
                {"cosine_min", b.cosine_min},
                {"top10_overlap", b.top10_overlap},
                {"argmax", b.argmax}}},
              {"within_budget", r.within_budget}};
}

namespace {

// A finite number in [lo, hi].
Status GetDouble(const json& j, const std::string& key, double lo, double hi, double* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return Missing(key, "a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return OutOfRange("metadata: \"" + key + "\" is outside [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  *out = v;
  return Status::Ok();
}

// An array of at most `max` elements.
Status GetArray(const json& j, const std::string& key, size_t max, const json** out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() > max)
    return Missing(key, ("an array of at most " + std::to_string(max)).c_str());
  *out = &*it;
  return Status::Ok();
}

}  // namespace

StatusOr<QuantizationReport> ReportFromJson(const json& j) {
  if (!j.is_object()) return Missing("report", "an object");
  QuantizationReport r;
  RETURN_IF_ERROR(GetString(j, "precision", &r.precision));
  RETURN_IF_ERROR(GetString(j, "calibration", &r.calibration));
  RETURN_IF_ERROR(GetInt(j, "calibration_sequences", 0, 1 << 30, &r.calibration_sequences));
  RETURN_IF_ERROR(GetInt(j, "held_out_sequences", 0, 1 << 30, &r.held_out_sequences));
  RETURN_IF_ERROR(GetInt(j, "linears", 0, 1 << 20, &r.linears));
  RETURN_IF_ERROR(GetInt(j, "quantized_linears", 0, r.linears, &r.quantized_linears));
  const json *kept = nullptr, *outputs = nullptr;
  RETURN_IF_ERROR(GetArray(j, "kept_fp32", 1 << 20, &kept));
  for (const json& k : *kept) {
    if (!k.is_array() || k.size() != 2 || !k[0].is_string() || !k[1].is_number())
      return Missing("kept_fp32", "a list of [name, score] pairs");
    r.kept_fp32.emplace_back(k[0].get<std::string>(), k[1].get<double>());
  }
  // (Absent in the int8 plans written before fp8.)
  if (j.contains("unsupported")) {
    const json* unsupported = nullptr;
    RETURN_IF_ERROR(GetArray(j, "unsupported", 1 << 20, &unsupported));
    for (const json& u : *unsupported) {
      if (!u.is_string()) return Missing("unsupported", "a list of Linear names");
      r.unsupported.push_back(u.get<std::string>());
    }
  }
  RETURN_IF_ERROR(GetArray(j, "outputs", 64, &outputs));
  for (const json& o : *outputs) {
    if (!o.is_object()) return Missing("outputs", "a list of objects");
    OutputAccuracy a;
    RETURN_IF_ERROR(GetString(o, "output", &a.output));
    RETURN_IF_ERROR(GetInt(o, "rows", 0, 1 << 30, &a.rows));
    RETURN_IF_ERROR(GetDouble(o, "cosine_mean", -1, 1, &a.cosine_mean));
    // (Absent in the plans written before the fallback's margin.)
    if (o.contains("cosine_mean_stderr"))
      RETURN_IF_ERROR(GetDouble(o, "cosine_mean_stderr", 0, 2, &a.cosine_mean_stderr));
    RETURN_IF_ERROR(GetDouble(o, "cosine_min", -1, 1, &a.cosine_min));
    RETURN_IF_ERROR(GetDouble(o, "max_abs_error", 0, 1e300, &a.max_abs_error));
    RETURN_IF_ERROR(GetDouble(o, "argmax_agreement", -1, 1, &a.argmax_agreement));
    RETURN_IF_ERROR(GetDouble(o, "top10_overlap", -1, 1, &a.top10_overlap));
    r.outputs.push_back(std::move(a));
  }
  auto budget = j.find("budget");
  if (budget == j.end() || !budget->is_object()) return Missing("budget", "an object");
  AccuracyBudget& b = r.budget;
  RETURN_IF_ERROR(GetDouble(*budget, "cosine_mean", -1, 1, &b.cosine_mean));
  RETURN_IF_ERROR(GetDouble(*budget, "cosine_min", -1, 1, &b.cosine_min));
  RETURN_IF_ERROR(GetDouble(*budget, "top10_overlap", 0, 1, &b.top10_overlap));
  RETURN_IF_ERROR(GetDouble(*budget, "argmax", 0, 1, &b.argmax));
  RETURN_IF_ERROR(GetBool(j, "within_budget", &r.within_budget));
  return r;
}

json QuantizedToJson(const QuantizedWeights& q) {
  json linears = json::object(), outputs = json::array();
  for (const auto& [name, linear] : q.linears) linears[name] = linear.input_scale;
  for (const NamedOutput& o : q.check_outputs.outputs)
    outputs.push_back({{"name", o.name}, {"per_token", o.per_token}, {"width", o.width}});
  return json{{"linears", linears},
              {"report", ReportToJson(q.report)},
              {"check",
               {{"sequences", q.check_batch.num_seqs()},
                {"tokens", q.check_batch.num_tokens()},
                {"outputs", outputs},
                {"reference", !q.check_reference.outputs.empty()}}}};
}

StatusOr<QuantizedWeights> QuantizedFromJson(const json& j, QuantFormat format,
                                             const std::vector<TensorSpec>& specs,
                                             int* check_sequences, int* check_tokens) {
  const std::string key = QuantFormatName(format);
  if (!j.is_object()) return Missing(key, "an object");
  QuantizedWeights q;
  q.format = format;
  auto linears = j.find("linears");
  if (linears == j.end() || !linears->is_object()) return Missing(key + ".linears", "an object");
  // fp8 inputs always have a calibrated scale; int8's 0 means per token.
  const double least = format == QuantFormat::kFp8 ? 1e-30 : 0.0;
  for (const auto& item : linears->items()) {
    const std::string& name = item.key();
    const json& scale = item.value();
    const bool known = std::any_of(specs.begin(), specs.end(), [&](const TensorSpec& s) {
      return s.encoder_linear_weight && s.name == name;
    });
    if (!known)
      return InvalidArgument("metadata: " + key + " Linear " + name +
                             " is not an encoder Linear's weight");
    if (!scale.is_number() || !(scale.get<double>() >= least && scale.get<double>() <= 1e30))
      return Missing(key + ".linears." + name,
                     format == QuantFormat::kFp8 ? "an input scale in (0, 1e30]"
                                                 : "an input scale in [0, 1e30]");
    q.linears[name].input_scale = static_cast<float>(scale.get<double>());
  }
  auto report = j.find("report");
  if (report == j.end()) return Missing(key + ".report", "an object");
  ASSIGN_OR_RETURN(q.report, ReportFromJson(*report));
  auto check = j.find("check");
  if (check == j.end() || !check->is_object()) return Missing(key + ".check", "an object");
  RETURN_IF_ERROR(GetInt(*check, "sequences", 1, 1 << 20, check_sequences));
  RETURN_IF_ERROR(GetInt(*check, "tokens", *check_sequences, 1 << 24, check_tokens));
  const json* outputs = nullptr;
  RETURN_IF_ERROR(GetArray(*check, "outputs", 64, &outputs));
  for (const json& o : *outputs) {
    if (!o.is_object()) return Missing(key + ".check.outputs", "a list of objects");
    NamedOutput out;
    RETURN_IF_ERROR(GetString(o, "name", &out.name));
    RETURN_IF_ERROR(GetBool(o, "per_token", &out.per_token));
    RETURN_IF_ERROR(GetInt(o, "width", 1, 1 << 24, &out.width));
    q.check_outputs.outputs.push_back(std::move(out));
  }
  // fp8's check also holds the fp32 model's answers on the same outputs.
  bool reference = false;
  if (check->contains("reference")) RETURN_IF_ERROR(GetBool(*check, "reference", &reference));
  if (format == QuantFormat::kFp8 && !reference)
    return Missing(key + ".check.reference", "true (an fp8 check holds fp32's answers)");
  if (reference) q.check_reference = q.check_outputs;
  return q;
}

}  // namespace bertrt::plan

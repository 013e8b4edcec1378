#include "builder/plan_layout.h"

#include <algorithm>
#include <cmath>

#include "builder/plan_format.h"
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
template <typename E, typename NameFn>
Status GetEnum(const json& j, const std::string& key, std::initializer_list<E> values,
               NameFn name, E* out) {
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
    const bool linear = g.role == model::Role::kQkv || g.role == model::Role::kAttnOut ||
                        g.role == model::Role::kFfnIn || g.role == model::Role::kFfnOut;
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

constexpr std::initializer_list<Pooling> kPoolings = {
    Pooling::kCls,         Pooling::kMean,         Pooling::kMax,
    Pooling::kMeanSqrtLen, Pooling::kWeightedMean, Pooling::kLastToken};

// "pooling": a name (plans written before concatenated modes) or a list.
Status PoolingFromJson(const json& j, std::vector<Pooling>* modes) {
  auto it = j.find("pooling");
  if (it == j.end()) return Missing("pooling", "a pooling mode or a list of them");
  const json list = it->is_string() ? json::array({*it}) : *it;
  if (!list.is_array() || list.empty() || list.size() > 16)
    return Missing("pooling", "a pooling mode or a list of 1 to 16");
  modes->clear();
  for (const json& name : list) {
    Pooling p = Pooling::kMean;
    RETURN_IF_ERROR(GetEnum(json{{"pooling", name}}, "pooling", kPoolings, PoolingName, &p));
    modes->push_back(p);
  }
  return Status::Ok();
}

// The sentence-transformers fields newer plans carry; absent ones keep their
// defaults (no Dense module, no truncation, no prompts).
Status SentenceTransformersFromJson(const json& j, ModelConfig* c) {
  RETURN_IF_ERROR(PoolingFromJson(j, &c->pooling_modes));
  if (auto dense = j.find("dense"); dense != j.end()) {
    if (!dense->is_array() || dense->size() > 16) return Missing("dense", "a list of 0 to 16");
    int width = c->pooled_width();
    for (const json& d : *dense) {
      if (!d.is_object()) return Missing("dense", "a list of objects");
      DenseSpec spec;
      RETURN_IF_ERROR(GetInt(d, "in_features", width, width, &spec.in_features));
      RETURN_IF_ERROR(GetInt(d, "out_features", 1, 1 << 20, &spec.out_features));
      RETURN_IF_ERROR(GetBool(d, "bias", &spec.bias));
      RETURN_IF_ERROR(GetEnum(d, "activation", kDenseActivations, DenseActivationName,
                              &spec.activation));
      width = spec.out_features;
      c->dense.push_back(spec);
    }
  }
  if (j.contains("truncate_dim")) {
    RETURN_IF_ERROR(GetInt(j, "truncate_dim", 0, c->dense_output_width(), &c->truncate_dim));
  }
  if (auto prompts = j.find("prompts"); prompts != j.end()) {
    if (!prompts->is_array()) return Missing("prompts", "a list of [name, text] pairs");
    for (const json& p : *prompts) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
        return Missing("prompts", "a list of [name, text] pairs");
      c->prompts.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
    }
  }
  if (j.contains("default_prompt_name")) {
    RETURN_IF_ERROR(GetString(j, "default_prompt_name", &c->default_prompt_name));
    if (!c->default_prompt_name.empty() && !c->PromptText(std::nullopt).ok())
      return InvalidArgument("metadata: default_prompt_name is not one of the prompts");
  }
  if (j.contains("include_prompt"))
    RETURN_IF_ERROR(GetBool(j, "include_prompt", &c->include_prompt));
  return Status::Ok();
}

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

json ConfigToJson(const ModelConfig& c) {
  return json{{"architecture", c.architecture},
              {"model_type", c.model_type},
              {"vocab_size", c.vocab_size},
              {"hidden_size", c.hidden_size},
              {"num_layers", c.num_layers},
              {"num_heads", c.num_heads},
              {"intermediate_size", c.intermediate_size},
              {"max_position_embeddings", c.max_position_embeddings},
              {"type_vocab_size", c.type_vocab_size},
              {"layer_norm_eps", c.layer_norm_eps},
              {"hidden_act", HiddenActName(c.hidden_act)},
              {"pad_token_id", c.pad_token_id},
              {"position_offset", c.position_offset},
              {"takes_token_types", c.takes_token_types},
              {"pooler_activation", DenseActivationName(c.pooler_activation)},
              {"relative_attention_buckets", c.relative_attention_buckets},
              {"mlm_activation", HiddenActName(c.mlm_activation)},
              {"splade_sum", c.splade_sum},
              {"splade_log1p_twice", c.splade_log1p_twice},
              {"pre_norm", c.pre_norm},
              {"gated_ffn", c.gated_ffn},
              {"rope_theta", c.rope_theta},
              {"local_rope_theta", c.local_rope_theta},
              {"local_window", c.local_window},
              {"global_attention_every", c.global_attention_every},
              {"classifier_mean_pooling", c.classifier_mean_pooling},
              {"prediction_head", c.prediction_head},
              {"head", HeadKindName(c.head)},
              {"num_labels", c.num_labels},
              {"labels", c.labels},
              {"pooling", PoolingNames(c.pooling_modes)},
              {"dense", DenseToJson(c.dense)},
              {"normalize", c.normalize},
              {"truncate_dim", c.truncate_dim},
              {"prompts", c.prompts},
              {"default_prompt_name", c.default_prompt_name},
              {"include_prompt", c.include_prompt},
              {"max_seq_length", c.max_seq_length}};
}

StatusOr<ModelConfig> ConfigFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("metadata: \"config\" is not an object");
  ModelConfig c;
  RETURN_IF_ERROR(GetString(j, "architecture", &c.architecture));
  RETURN_IF_ERROR(GetString(j, "model_type", &c.model_type));
  // Bounds keep every size product far from int64 overflow; the sections'
  // lengths (checked against the file) are what really bound the memory.
  RETURN_IF_ERROR(GetInt(j, "vocab_size", 1, 1 << 24, &c.vocab_size));
  RETURN_IF_ERROR(GetInt(j, "hidden_size", 1, 1 << 16, &c.hidden_size));
  RETURN_IF_ERROR(GetInt(j, "num_layers", 1, 1024, &c.num_layers));
  RETURN_IF_ERROR(GetInt(j, "num_heads", 1, c.hidden_size, &c.num_heads));
  RETURN_IF_ERROR(GetInt(j, "intermediate_size", 1, 1 << 20, &c.intermediate_size));
  RETURN_IF_ERROR(GetInt(j, "max_position_embeddings", 1, 1 << 20, &c.max_position_embeddings));
  RETURN_IF_ERROR(GetInt(j, "type_vocab_size", 1, 1 << 16, &c.type_vocab_size));
  RETURN_IF_ERROR(GetInt(j, "pad_token_id", -(1 << 30), 1 << 30, &c.pad_token_id));
  RETURN_IF_ERROR(GetInt(j, "num_labels", 0, 1 << 20, &c.num_labels));
  // The family's structure; plans written before families existed are BERT's.
  if (j.contains("position_offset"))
    RETURN_IF_ERROR(GetInt(j, "position_offset", 0, c.max_position_embeddings - 1,
                           &c.position_offset));
  if (j.contains("takes_token_types"))
    RETURN_IF_ERROR(GetBool(j, "takes_token_types", &c.takes_token_types));
  if (j.contains("pooler_activation"))
    RETURN_IF_ERROR(GetEnum(j, "pooler_activation", kDenseActivations, DenseActivationName,
                            &c.pooler_activation));
  if (j.contains("relative_attention_buckets"))
    RETURN_IF_ERROR(GetInt(j, "relative_attention_buckets", 0, 1 << 16,
                           &c.relative_attention_buckets));
  // SPLADE's, in plans of a sparse-embedding head (absent before it existed).
  if (j.contains("mlm_activation"))
    RETURN_IF_ERROR(GetEnum(j, "mlm_activation", kHiddenActs, HiddenActName, &c.mlm_activation));
  if (j.contains("splade_sum")) RETURN_IF_ERROR(GetBool(j, "splade_sum", &c.splade_sum));
  if (j.contains("splade_log1p_twice"))
    RETURN_IF_ERROR(GetBool(j, "splade_log1p_twice", &c.splade_log1p_twice));
  // ModernBERT's structure (absent in plans of the families before it).
  for (const auto& [key, flag] :
       {std::pair{"pre_norm", &c.pre_norm}, std::pair{"gated_ffn", &c.gated_ffn},
        std::pair{"classifier_mean_pooling", &c.classifier_mean_pooling},
        std::pair{"prediction_head", &c.prediction_head}})
    if (j.contains(key)) RETURN_IF_ERROR(GetBool(j, key, flag));
  for (const auto& [key, theta] : {std::pair{"rope_theta", &c.rope_theta},
                                   std::pair{"local_rope_theta", &c.local_rope_theta}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number() || !(j[key].get<double>() >= 0 && j[key].get<double>() < 1e12))
      return Missing(key, "a number in [0, 1e12)");
    *theta = static_cast<float>(j[key].get<double>());
  }
  if (j.contains("local_window"))
    RETURN_IF_ERROR(GetInt(j, "local_window", 0, 1 << 20, &c.local_window));
  if (j.contains("global_attention_every"))
    RETURN_IF_ERROR(GetInt(j, "global_attention_every", 1, 1 << 20, &c.global_attention_every));
  RETURN_IF_ERROR(GetInt(j, "max_seq_length", 1, c.max_positions(), &c.max_seq_length));
  if (c.hidden_size % c.num_heads != 0)
    return InvalidArgument("metadata: hidden_size is not divisible by num_heads");
  auto eps = j.find("layer_norm_eps");
  if (eps == j.end() || !eps->is_number()) return Missing("layer_norm_eps", "a number");
  // Range-checked as a double first: converting an out-of-range double to
  // float is undefined behaviour.
  const double eps_value = eps->get<double>();
  if (!(eps_value >= 0 && eps_value <= 1))
    return OutOfRange("metadata: layer_norm_eps must be in [0, 1]");
  c.layer_norm_eps = static_cast<float>(eps_value);
  RETURN_IF_ERROR(GetEnum(j, "hidden_act", kHiddenActs, HiddenActName, &c.hidden_act));
  RETURN_IF_ERROR(GetEnum(j, "head",
                          {HeadKind::kBase, HeadKind::kSequenceClassification,
                           HeadKind::kTokenClassification, HeadKind::kQuestionAnswering,
                           HeadKind::kSentenceEmbedding, HeadKind::kSparseEmbedding},
                          HeadKindName, &c.head));
  RETURN_IF_ERROR(SentenceTransformersFromJson(j, &c));
  RETURN_IF_ERROR(GetBool(j, "normalize", &c.normalize));
  auto labels = j.find("labels");
  if (labels == j.end() || !labels->is_array()) return Missing("labels", "an array");
  if (!labels->empty() && labels->size() != static_cast<size_t>(c.num_labels))
    return InvalidArgument("metadata: " + std::to_string(labels->size()) + " labels for " +
                           std::to_string(c.num_labels) + " classes");
  for (const json& l : *labels) {
    if (!l.is_string()) return Missing("labels", "an array of strings");
    c.labels.push_back(l.get<std::string>());
  }
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

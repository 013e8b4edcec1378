#include "importer/hf_config.h"

#include <filesystem>
#include <limits>
#include <map>

#include "core/files.h"
#include "families/family.h"
#include "core/json_util.h"

namespace bertrt::importer {
using checkpoint::JoinPath;
using checkpoint::ReadLabelsFile;

namespace {

namespace fs = std::filesystem;

// Model types bertrt has no family for yet; each gets a message saying how
// its computation differs instead of producing wrong outputs.
const char* RejectionReason(const std::string& model_type) {
  static const std::map<std::string, const char*> kReasons = {
      {"albert", "it shares layers and factorizes embeddings"},
      {"electra", "its embedding size differs from the hidden size"},
      {"deberta", "it uses disentangled relative attention"},
      {"deberta-v2", "it uses disentangled relative attention"},
      {"nomic_bert", "it uses rotary embeddings"},
  };
  auto it = kReasons.find(model_type);
  return it == kReasons.end() ? nullptr : it->second;
}

}  // namespace

namespace {

Status ReadLabels(const nlohmann::json& j, const std::string& path, const NoticeFn& notice,
                  ModelConfig* c) {
  ASSIGN_OR_RETURN(std::optional<int64_t> num_labels, GetInt(j, "num_labels", path));
  auto it = j.find("id2label");
  if (it == j.end() || it->is_null() || it->empty()) {
    const int64_t n = num_labels.value_or(2);  // PretrainedConfig's default
    if (n < 1 || n > 1000000)
      return InvalidArgument(path + ": num_labels = " + std::to_string(n) + " is out of range");
    c->num_labels = static_cast<int>(n);
    c->labels.clear();
    for (int i = 0; i < c->num_labels; ++i) c->labels.push_back("LABEL_" + std::to_string(i));
    return Status::Ok();
  }
  if (!it->is_object()) return InvalidArgument(path + ": \"id2label\" must be an object");
  std::map<int64_t, std::string> by_id;
  for (const auto& [key, value] : it->items()) {
    int64_t id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || key.empty() || id < 0)
      return InvalidArgument(path + ": id2label key \"" + key + "\" is not a class index");
    if (!value.is_string())
      return InvalidArgument(path + ": id2label[\"" + key + "\"] is not a string");
    by_id[id] = value.get<std::string>();
  }
  const int64_t n = static_cast<int64_t>(by_id.size());
  if (by_id.rbegin()->first != n - 1)
    return InvalidArgument(path + ": id2label ids must be 0.." + std::to_string(n - 1) +
                           "; found id " + std::to_string(by_id.rbegin()->first));
  if (num_labels && *num_labels != n && notice)
    notice(path + ": num_labels = " + std::to_string(*num_labels) + " disagrees with " +
           std::to_string(n) + " id2label entries; using id2label (as transformers does)");
  c->num_labels = static_cast<int>(n);
  c->labels.clear();
  for (auto& [id, label] : by_id) c->labels.push_back(std::move(label));
  return Status::Ok();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The head from architectures[0], the same for every family: its class
// name ends in what the head is (XLMRobertaForSequenceClassification).
Status ReadHead(const nlohmann::json& j, const std::string& path, const NoticeFn& notice,
                ModelConfig* c) {
  auto arch = j.find("architectures");
  if (arch != j.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string())
    c->architecture = (*arch)[0].get<std::string>();
  if (c->architecture.empty() || EndsWith(c->architecture, "Model")) {
    c->head = HeadKind::kBase;
  } else if (EndsWith(c->architecture, "ForSequenceClassification")) {
    c->head = HeadKind::kSequenceClassification;
    return ReadLabels(j, path, notice, c);
  } else if (EndsWith(c->architecture, "ForTokenClassification")) {
    c->head = HeadKind::kTokenClassification;
    return ReadLabels(j, path, notice, c);
  } else if (EndsWith(c->architecture, "ForMaskedLM")) {
    // An encoder server has one use for a masked-LM head: SPLADE's sparse
    // vectors (text-embeddings-inference serves it with --pooling splade),
    // unless a sentence-transformers Pooling module says otherwise (the
    // importer says which, once it knows).
    c->head = HeadKind::kSparseEmbedding;
  } else if (EndsWith(c->architecture, "ForQuestionAnswering")) {
    c->head = HeadKind::kQuestionAnswering;
    ASSIGN_OR_RETURN(std::optional<int64_t> n, GetInt(j, "num_labels", path));
    auto labels = j.find("id2label");
    const int64_t count = labels != j.end() && labels->is_object() && !labels->empty()
                              ? static_cast<int64_t>(labels->size()) : n.value_or(2);
    if (count != 2)
      return Unimplemented(path + ": " + c->architecture + " with " + std::to_string(count) +
                           " outputs; only start/end (2) is supported");
    c->num_labels = 2;
  } else {
    c->head = HeadKind::kBase;
    if (notice)
      notice(path + ": architecture " + c->architecture +
             " has no bertrt head; loading the encoder as a base model (pooler output)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& j, const std::string& path,
                                       const NoticeFn& notice) {
  if (!j.is_object()) return InvalidArgument(path + ": expected a JSON object");
  ModelConfig c;
  ASSIGN_OR_RETURN(std::optional<std::string> model_type, GetString(j, "model_type", path));
  c.model_type = model_type.value_or("bert");
  const families::Family* family = families::FindFamily(c.model_type);
  if (!family) {
    const char* reason = RejectionReason(c.model_type);
    return Unimplemented(path + ": model_type \"" + c.model_type + "\" is not supported" +
                         (reason ? std::string(": ") + reason : "") +
                         ". bertrt serves model_type " + families::SupportedModelTypes() +
                         " (BERT, MiniLM, BGE, E5, RoBERTa, XLM-RoBERTa, CamemBERT, DistilBERT, "
                         "...)");
  }
  RETURN_IF_ERROR(family->read_config(j, path, &c));
  if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size)
    return InvalidArgument(path + ": pad_token_id " + std::to_string(c.pad_token_id) +
                           " is outside the vocabulary of " + std::to_string(c.vocab_size));
  if (c.max_positions() < 1)
    return InvalidArgument(path + ": max_position_embeddings " +
                           std::to_string(c.max_position_embeddings) + " leaves no position " +
                           "for a token (" + family->name + "'s positions start at " +
                           std::to_string(c.position_offset) + ")");
  RETURN_IF_ERROR(ReadHead(j, path, notice, &c));
  c.max_seq_length = c.max_positions();
  return c;
}

namespace {

// 1_Pooling/config.json in any form sentence-transformers wrote: 2.x-4.x's
// pooling_mode_* booleans (concatenated in sentence-transformers' order), 5.x+'s
// "pooling_mode" (a name or a list of names) and "embedding_dimension".
Status ReadPooling(const std::string& path, SentenceTransformersLayout* layout) {
  ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  if (!j.is_object()) return InvalidArgument(path + ": expected a JSON object");
  for (const char* key : {"embedding_dimension", "word_embedding_dimension"}) {
    ASSIGN_OR_RETURN(std::optional<int64_t> dim, GetInt(j, key, path));
    if (!dim) continue;
    if (*dim < 1 || *dim > std::numeric_limits<int32_t>::max())
      return InvalidArgument(path + ": " + key + " " + std::to_string(*dim) + " is out of range");
    layout->embedding_dimension = static_cast<int>(*dim);
    break;
  }
  static const Pooling kAll[] = {Pooling::kCls,         Pooling::kMax,
                                 Pooling::kMean,        Pooling::kMeanSqrtLen,
                                 Pooling::kWeightedMean, Pooling::kLastToken};
  auto by_name = [&](const nlohmann::json& v) -> StatusOr<Pooling> {
    if (v.is_string())
      for (Pooling p : kAll)
        if (v.get<std::string>() == PoolingName(p)) return p;
    return InvalidArgument(path + ": pooling_mode " + v.dump() +
                           " is not one of \"cls\", \"max\", \"mean\", "
                           "\"mean_sqrt_len_tokens\", \"weightedmean\", \"lasttoken\"");
  };
  std::vector<Pooling>& modes = layout->pooling_modes;
  modes.clear();
  if (auto it = j.find("pooling_mode"); it != j.end() && !it->is_null()) {
    if (it->is_array()) {
      for (const nlohmann::json& v : *it) {
        ASSIGN_OR_RETURN(Pooling p, by_name(v));
        modes.push_back(p);
      }
    } else {
      ASSIGN_OR_RETURN(Pooling p, by_name(*it));
      modes.push_back(p);
    }
  } else {
    static const std::pair<const char*, Pooling> kLegacy[] = {
        {"pooling_mode_cls_token", Pooling::kCls},
        {"pooling_mode_max_tokens", Pooling::kMax},
        {"pooling_mode_mean_tokens", Pooling::kMean},
        {"pooling_mode_mean_sqrt_len_tokens", Pooling::kMeanSqrtLen},
        {"pooling_mode_weightedmean_tokens", Pooling::kWeightedMean},
        {"pooling_mode_lasttoken", Pooling::kLastToken},
    };
    for (const auto& [key, pooling] : kLegacy) {
      ASSIGN_OR_RETURN(std::optional<bool> on, GetBool(j, key, path));
      if (on.value_or(false)) modes.push_back(pooling);
    }
  }
  // What sentence-transformers does with no mode chosen.
  if (modes.empty()) modes.push_back(Pooling::kMean);
  ASSIGN_OR_RETURN(std::optional<bool> include_prompt, GetBool(j, "include_prompt", path));
  layout->include_prompt = include_prompt.value_or(true);
  return Status::Ok();
}

// A SparseEncoder's SpladePooling module config.json.
Status ReadSpladePooling(const std::string& path, SentenceTransformersLayout* layout) {
  ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  if (!j.is_object()) return InvalidArgument(path + ": expected a JSON object");
  ASSIGN_OR_RETURN(std::optional<std::string> strategy, GetString(j, "pooling_strategy", path));
  ASSIGN_OR_RETURN(std::optional<std::string> act, GetString(j, "activation_function", path));
  const std::string s = strategy.value_or("max"), a = act.value_or("relu");
  if (s != "max" && s != "sum")
    return InvalidArgument(path + ": pooling_strategy \"" + s + "\" is not \"max\" or \"sum\"");
  if (a != "relu" && a != "log1p_relu")
    return InvalidArgument(path + ": activation_function \"" + a +
                           "\" is not \"relu\" or \"log1p_relu\"");
  layout->splade = true;
  layout->splade_sum = s == "sum";
  layout->splade_log1p_twice = a == "log1p_relu";
  return Status::Ok();
}

// A Dense module's config.json (2_Dense/ and the like).
StatusOr<DenseSpec> ReadDense(const std::string& path) {
  ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  if (!j.is_object()) return InvalidArgument(path + ": expected a JSON object");
  DenseSpec d;
  for (auto [key, out] : {std::pair{"in_features", &d.in_features},
                          std::pair{"out_features", &d.out_features}}) {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, GetInt(j, key, path));
    if (!v) return InvalidArgument(path + ": \"" + key + "\" is missing");
    if (*v < 1 || *v > (1 << 20))
      return InvalidArgument(path + ": " + key + " " + std::to_string(*v) + " is out of range");
    *out = static_cast<int>(*v);
  }
  ASSIGN_OR_RETURN(std::optional<bool> bias, GetBool(j, "bias", path));
  d.bias = bias.value_or(true);
  ASSIGN_OR_RETURN(std::optional<std::string> act, GetString(j, "activation_function", path));
  static const std::pair<const char*, DenseActivation> kActivations[] = {
      {"torch.nn.modules.activation.Tanh", DenseActivation::kTanh},
      {"torch.nn.modules.linear.Identity", DenseActivation::kIdentity},
      {"torch.nn.modules.activation.ReLU", DenseActivation::kRelu},
      {"torch.nn.modules.activation.GELU", DenseActivation::kGelu},
      {"torch.nn.modules.activation.Sigmoid", DenseActivation::kSigmoid},
  };
  if (act) {
    bool known = false;
    for (const auto& [name, a] : kActivations)
      if (*act == name) d.activation = a, known = true;
    if (!known)
      return Unimplemented(path + ": activation_function \"" + *act +
                           "\" is not supported (Tanh, Identity, ReLU, GELU and Sigmoid from "
                           "torch.nn are)");
  }
  ASSIGN_OR_RETURN(std::optional<bool> residual, GetBool(j, "use_residual", path));
  if (residual.value_or(false))
    return Unimplemented(path + ": use_residual = true is not supported");
  for (const char* key : {"module_input_name", "module_output_name"}) {
    ASSIGN_OR_RETURN(std::optional<std::string> name, GetString(j, key, path));
    if (name && *name != "sentence_embedding")
      return Unimplemented(path + ": " + key + " \"" + *name +
                           "\" is not supported (Dense on the sentence embedding is)");
  }
  return d;
}

// config_sentence_transformers.json: prompts, default_prompt_name, truncate_dim.
Status ReadModelSettings(const std::string& path, SentenceTransformersLayout* layout) {
  if (!std::filesystem::exists(path)) return Status::Ok();
  ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  if (!j.is_object()) return InvalidArgument(path + ": expected a JSON object");
  if (auto it = j.find("prompts"); it != j.end() && !it->is_null()) {
    if (!it->is_object())
      return InvalidArgument(path + ": \"prompts\" must map prompt names to texts");
    for (const auto& [name, text] : it->items()) {
      if (!text.is_string())
        return InvalidArgument(path + ": prompt \"" + name + "\" is not a string");
      layout->prompts.emplace_back(name, text.get<std::string>());
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::string> def, GetString(j, "default_prompt_name", path));
  if (def) {
    bool found = false;
    for (const auto& p : layout->prompts) found |= p.first == *def;
    if (!found)
      return InvalidArgument(path + ": default_prompt_name \"" + *def +
                             "\" is not one of its prompts");
    layout->default_prompt_name = *def;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> truncate, GetInt(j, "truncate_dim", path));
  if (truncate) {
    if (*truncate < 1 || *truncate > (1 << 20))
      return InvalidArgument(path + ": truncate_dim " + std::to_string(*truncate) +
                             " is out of range");
    layout->truncate_dim = static_cast<int>(*truncate);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::optional<SentenceTransformersLayout>> ReadSentenceTransformersLayout(
    const std::string& dir) {
  const std::string modules_path = JoinPath(dir, "modules.json");
  if (!std::filesystem::exists(modules_path)) return std::optional<SentenceTransformersLayout>();
  ASSIGN_OR_RETURN(nlohmann::json modules, ReadJsonFile(modules_path));
  if (!modules.is_array()) return InvalidArgument(modules_path + ": expected a JSON array");

  SentenceTransformersLayout layout;
  bool have_transformer = false, have_pooling = false;
  // Modules run in the file's order; bertrt computes Transformer, Pooling,
  // Dense..., Normalize, so any other order is refused.
  auto out_of_order = [&](const std::string& what) {
    return Unimplemented(modules_path + ": " + what +
                         " (bertrt runs Transformer, Pooling, Dense modules, Normalize in "
                         "that order)");
  };
  for (const nlohmann::json& m : modules) {
    ASSIGN_OR_RETURN(std::optional<std::string> type, GetString(m, "type", modules_path));
    ASSIGN_OR_RETURN(std::optional<std::string> sub, GetString(m, "path", modules_path));
    if (!type) return InvalidArgument(modules_path + ": a module has no \"type\"");
    const std::string rel = sub.value_or("");
    // Module paths come from an untrusted file; keep them inside the directory.
    if (std::filesystem::path(rel).is_absolute() || rel.find("..") != std::string::npos)
      return InvalidArgument(modules_path + ": module path \"" + rel +
                             "\" leaves the model directory");
    const std::string module_dir = JoinPath(dir, rel);
    // Older releases write "sentence_transformers.models.Pooling", newer ones
    // the defining module ("...modules.pooling.Pooling"): match the class name.
    const std::string cls = type->substr(type->rfind('.') + 1);
    const bool ours = type->rfind("sentence_transformers.", 0) == 0;
    // A module's settings: its folder's config.json, which a partial copy of
    // the model may have left behind.
    auto module_config = [&]() -> StatusOr<std::string> {
      const std::string config = JoinPath(module_dir, "config.json");
      if (!std::filesystem::is_regular_file(config))
        return NotFound(modules_path + " names a " + cls + " module in \"" + rel + "\", but " +
                        config + " is missing: copy the model's whole folder (a download of "
                        "some of its files leaves the module folders out)");
      return config;
    };
    if (ours && (cls == "Transformer" || cls == "MLMTransformer")) {
      if (have_transformer) return out_of_order("a second Transformer module");
      layout.transformer_dir = module_dir;
      have_transformer = true;
    } else if (ours && cls == "Pooling") {
      if (!have_transformer || have_pooling) return out_of_order("Pooling is not second");
      ASSIGN_OR_RETURN(const std::string config, module_config());
      RETURN_IF_ERROR(ReadPooling(config, &layout));
      have_pooling = true;
    } else if (ours && cls == "SpladePooling") {
      if (!have_transformer || have_pooling) return out_of_order("SpladePooling is not second");
      ASSIGN_OR_RETURN(const std::string config, module_config());
      RETURN_IF_ERROR(ReadSpladePooling(config, &layout));
      have_pooling = true;
    } else if (ours && cls == "Dense") {
      if (!have_pooling || layout.normalize || layout.splade)
        return out_of_order("a Dense module out of place");
      ASSIGN_OR_RETURN(const std::string config, module_config());
      ASSIGN_OR_RETURN(DenseSpec d, ReadDense(config));
      layout.dense.emplace_back(module_dir, d);
    } else if (ours && cls == "Normalize") {
      if (!have_pooling || layout.splade) return out_of_order("Normalize out of place");
      layout.normalize = true;
    } else {
      return Unimplemented(modules_path + ": sentence-transformers module " + *type +
                           " is not supported (Transformer, Pooling, Dense and Normalize are; "
                           "MLMTransformer and SpladePooling for sparse encoders)");
    }
  }
  if (!have_transformer || !have_pooling)
    return Unimplemented(modules_path + ": expected a Transformer and a Pooling module");

  // sentence_bert_config.json sits with the Transformer module.
  for (const std::string& d : {layout.transformer_dir, dir}) {
    const std::string p = JoinPath(d, "sentence_bert_config.json");
    if (!std::filesystem::exists(p)) continue;
    ASSIGN_OR_RETURN(nlohmann::json sb, ReadJsonFile(p));
    ASSIGN_OR_RETURN(std::optional<int64_t> len, GetInt(sb, "max_seq_length", p));
    if (len && (*len < 1 || *len > std::numeric_limits<int32_t>::max()))
      return InvalidArgument(p + ": max_seq_length " + std::to_string(*len) + " is out of range");
    if (len) layout.max_seq_length = static_cast<int>(*len);
    break;
  }
  // sentence-transformers 5+ keeps it as the tokenizer's model_max_length
  // (a float such as 1e30 there means "no limit").
  const std::string tok_path = JoinPath(layout.transformer_dir, "tokenizer_config.json");
  if (!layout.max_seq_length && std::filesystem::exists(tok_path)) {
    ASSIGN_OR_RETURN(nlohmann::json tc, ReadJsonFile(tok_path));
    auto it = tc.is_object() ? tc.find("model_max_length") : tc.end();
    if (it != tc.end() && it->is_number_integer() && it->get<int64_t>() >= 1 &&
        it->get<int64_t>() <= std::numeric_limits<int32_t>::max())
      layout.max_seq_length = static_cast<int>(it->get<int64_t>());
  }
  RETURN_IF_ERROR(ReadModelSettings(JoinPath(dir, "config_sentence_transformers.json"), &layout));
  return std::optional<SentenceTransformersLayout>(std::move(layout));
}

Status ApplySentenceTransformers(const SentenceTransformersLayout& layout,
                                 const NoticeFn& notice, ModelConfig* c) {
  if (layout.splade) {
    if (c->head != HeadKind::kSparseEmbedding)
      return InvalidArgument("SpladePooling reads a masked-LM head's logits, but config.json's "
                             "architecture is " + c->architecture + ", not a ...ForMaskedLM");
    c->splade_sum = layout.splade_sum;
    c->splade_log1p_twice = layout.splade_log1p_twice;
  }
  if (layout.embedding_dimension != 0 && layout.embedding_dimension != c->hidden_size)
    return InvalidArgument("pooling embedding_dimension " +
                           std::to_string(layout.embedding_dimension) +
                           " differs from hidden_size " + std::to_string(c->hidden_size));
  int width = static_cast<int>(layout.pooling_modes.size()) * c->hidden_size;
  for (const auto& [dir, d] : layout.dense) {
    if (d.in_features != width)
      return InvalidArgument(JoinPath(dir, "config.json") + ": in_features " +
                             std::to_string(d.in_features) + " differs from the " +
                             std::to_string(width) + " values the module before it gives");
    width = d.out_features;
  }
  if (layout.truncate_dim > width)
    return InvalidArgument("config_sentence_transformers.json: truncate_dim " +
                           std::to_string(layout.truncate_dim) + " exceeds the embedding's " +
                           std::to_string(width) + " values");
  if (!layout.splade) {
    if (c->head != HeadKind::kBase && notice)
      notice("served as sentence embeddings, as modules.json's Pooling module says; the " +
             std::string(c->head == HeadKind::kSparseEmbedding ? "masked-LM"
                                                               : HeadKindName(c->head)) +
             " head of " + c->architecture + " in config.json is not used");
    c->head = HeadKind::kSentenceEmbedding;
    c->pooling_modes = layout.pooling_modes;
  }
  c->num_labels = 0;
  c->labels.clear();
  c->dense.clear();
  for (const auto& [dir, d] : layout.dense) c->dense.push_back(d);
  c->normalize = layout.normalize;
  c->truncate_dim = layout.truncate_dim;
  c->prompts = layout.prompts;
  c->default_prompt_name = layout.default_prompt_name;
  c->include_prompt = layout.include_prompt;
  c->max_seq_length = layout.max_seq_length.value_or(c->max_positions());
  if (c->max_seq_length > c->max_positions()) {
    if (notice)
      notice("sentence_bert_config max_seq_length " + std::to_string(c->max_seq_length) +
             " exceeds the model's " + std::to_string(c->max_positions()) + " positions; using " +
             std::to_string(c->max_positions()));
    c->max_seq_length = c->max_positions();
  }
  return Status::Ok();
}

Status ApplyLabels(const std::string& spec, ModelConfig* config, const NoticeFn& notice) {
  std::error_code ec;
  const bool file = fs::is_regular_file(spec, ec);
  std::vector<std::string> names;
  if (file) {
    ASSIGN_OR_RETURN(names, ReadLabelsFile(spec));
  } else {
    for (size_t start = 0;;) {
      const size_t comma = spec.find(',', start);
      names.push_back(spec.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  const std::string what = "--labels " + (file ? spec : "\"" + spec + "\"");
  if (config->head != HeadKind::kSequenceClassification &&
      config->head != HeadKind::kTokenClassification)
    return InvalidArgument(what + ": the model's head (" + HeadKindName(config->head) +
                           ") has no classes to name");
  for (const std::string& n : names)
    if (n.empty())
      return InvalidArgument(what + ": an empty label; give a file with one label per line or "
                             "a comma-separated list, as many as the classifier's " +
                             std::to_string(config->num_labels) + " outputs");
  if (static_cast<int>(names.size()) != config->num_labels)
    return InvalidArgument(what + ": " + std::to_string(names.size()) +
                           " labels, but the classifier has " +
                           std::to_string(config->num_labels) + " outputs");
  config->labels = std::move(names);
  if (notice) notice("labels: from " + what);
  return Status::Ok();
}

}  // namespace bertrt::importer

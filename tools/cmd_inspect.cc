// `bertrt inspect MODEL [--json]`: what bertrt understood of a model directory.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bertrt/importer.h"
#include "bertrt/plan.h"
#include "builder/plan_layout.h"
#include "cli_util.h"
#include "commands.h"
#include "model/model_check.h"

namespace bertrt::cli {

namespace {

struct InspectOptions {
  std::string model;
  ImportFlags import;
  bool json = false;
};

nlohmann::json Describe(const LoadedModel& loaded) {
  const ModelConfig& c = loaded.model->config;
  nlohmann::json j;
  j["source"] = loaded.model->source;
  if (!loaded.model->weights_format.empty()) j["weights_format"] = loaded.model->weights_format;
  j["import_notes"] = loaded.model->import_notes;
  j["architecture"] = c.architecture;
  j["model_type"] = c.model_type;
  j["head"] = HeadKindName(c.head);
  j["hidden_size"] = c.hidden_size;
  j["num_layers"] = c.num_layers;
  j["num_heads"] = c.num_heads;
  j["head_dim"] = c.head_dim();
  j["intermediate_size"] = c.intermediate_size;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["type_vocab_size"] = c.type_vocab_size;
  j["hidden_act"] = HiddenActName(c.hidden_act);
  j["layer_norm_eps"] = FloatJson(c.layer_norm_eps);
  j["pad_token_id"] = c.pad_token_id;
  j["position_offset"] = c.position_offset;
  j["takes_token_types"] = c.takes_token_types;
  if (HeadUsesPooler(*loaded.model))
    j["pooler_activation"] = DenseActivationName(c.pooler_activation);
  j["max_seq_length"] = c.max_seq_length;
  j["parameters"] = loaded.model->ParameterCount();
  j["has_pooler"] = !loaded.model->weights.pooler_w.empty();
  if (c.head == HeadKind::kSentenceEmbedding) {
    // As sentence-transformers writes it: a name, or a list when concatenated.
    nlohmann::json modes = nlohmann::json::array();
    for (Pooling p : c.pooling_modes) modes.push_back(PoolingName(p));
    j["pooling"] = modes.size() == 1 ? modes[0] : modes;
    j["dense"] = plan::DenseToJson(c.dense);
    j["normalize"] = c.normalize;
    if (c.truncate_dim > 0) j["truncate_dim"] = c.truncate_dim;
    j["embedding_dimension"] = c.embedding_width();
    nlohmann::json prompts = nlohmann::json::object();
    for (const auto& [name, text] : c.prompts) prompts[name] = text;
    j["prompts"] = prompts;
    if (!c.default_prompt_name.empty()) j["default_prompt_name"] = c.default_prompt_name;
    j["include_prompt"] = c.include_prompt;
  }
  if (c.head == HeadKind::kSparseEmbedding) {
    // SpladePooling's names: "max"/"sum", "relu"/"log1p_relu".
    j["splade"] = {{"pooling_strategy", c.splade_sum ? "sum" : "max"},
                   {"activation_function", c.splade_log1p_twice ? "log1p_relu" : "relu"},
                   {"mlm_activation", HiddenActName(c.mlm_activation)},
                   {"tied_decoder", loaded.model->weights.mlm_decoder_w.empty()}};
  }
  if (c.num_labels > 0) j["num_labels"] = c.num_labels;
  if (!c.labels.empty()) j["labels"] = c.labels;

  const Tokenizer& tok = *loaded.tokenizer;
  const TokenizerSettings& s = tok.settings();
  nlohmann::json t;
  t["vocab_size"] = tok.vocab_size();
  t["kind"] = tok.Description();
  // The BertNormalizer / WordPiece settings mean something for the fused
  // WordPiece tokenizer only.
  if (tok.Description().rfind("WordPiece (", 0) == 0) {
    t["lowercase"] = s.lowercase;
    // HF's rule: unset strip_accents follows lowercase.
    t["strip_accents"] = s.strip_accents.value_or(s.lowercase);
    t["handle_chinese_chars"] = s.handle_chinese_chars;
    t["clean_text"] = s.clean_text;
    t["max_input_chars_per_word"] = s.max_input_chars_per_word;
    t["continuing_subword_prefix"] = s.continuing_subword_prefix;
  }
  nlohmann::json special = nlohmann::json::object();
  for (const std::string* token : {&s.cls_token, &s.sep_token, &s.pad_token, &s.unk_token})
    special[*token] = tok.TokenToId(*token);
  t["special_tokens"] = special;
  j["tokenizer"] = t;
  return j;
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

void PrintText(const nlohmann::json& j, std::ostream& out) {
  auto row = [&out](const char* key, const std::string& value) {
    out << std::left << std::setw(18) << key << value << "\n";
  };
  auto str = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  row("model", str(j["source"]));
  if (j.contains("weights_format")) row("weights", str(j["weights_format"]));
  for (const nlohmann::json& note : j["import_notes"]) row("import", str(note));
  row("architecture",
      j["architecture"].get<std::string>().empty() ? "(none given)" : str(j["architecture"]));
  row("model_type", str(j["model_type"]));
  row("head", str(j["head"]));
  row("hidden size", str(j["hidden_size"]));
  row("layers", str(j["num_layers"]));
  row("attention heads", str(j["num_heads"]) + " (head dim " + str(j["head_dim"]) + ")");
  row("intermediate", str(j["intermediate_size"]));
  row("vocab size", str(j["vocab_size"]));
  const int offset = j["position_offset"].get<int>();
  row("max positions",
      std::to_string(j["max_position_embeddings"].get<int>() - offset) +
          (offset ? " (table rows from " + std::to_string(offset) + ")" : ""));
  row("token types", j["takes_token_types"].get<bool>() ? str(j["type_vocab_size"])
                                                        : "none (type 0 for every token)");
  if (j.contains("pooler_activation")) row("pooler activation", str(j["pooler_activation"]));
  row("activation", str(j["hidden_act"]));
  row("layer norm eps", str(j["layer_norm_eps"]));
  row("parameters", str(j["parameters"]) + (j["has_pooler"].get<bool>() ? "" : " (no pooler)"));
  row("max seq length", str(j["max_seq_length"]));
  if (j.contains("pooling")) {
    row("pooling", str(j["pooling"]));
    for (const nlohmann::json& d : j["dense"])
      row("dense", str(d["in_features"]) + " -> " + str(d["out_features"]) + ", " +
                       str(d["activation"]) + (d["bias"].get<bool>() ? "" : ", no bias"));
    row("normalize", YesNo(j["normalize"].get<bool>()));
    if (j.contains("truncate_dim")) row("truncate dim", str(j["truncate_dim"]));
    row("embedding width", str(j["embedding_dimension"]));
    for (const auto& [name, text] : j["prompts"].items())
      row("prompt", name + " = " + text.dump() +
                        (j.value("default_prompt_name", "") == name ? " (default)" : ""));
    if (!j["include_prompt"].get<bool>()) row("prompt tokens", "left out of the pooling");
  }
  if (j.contains("splade")) {
    const nlohmann::json& s = j["splade"];
    row("splade", str(s["pooling_strategy"]) + " of log(1 + " +
                      (str(s["activation_function"]) == "relu" ? "relu" : "log(1 + relu)") +
                      ") over the tokens, vocabulary-wide");
    row("masked-LM head", "activation " + str(s["mlm_activation"]) +
                              (s["tied_decoder"].get<bool>() ? ", decoder tied to the embeddings"
                                                             : ", decoder of its own"));
  }
  if (j.contains("labels")) {
    std::string labels;
    for (size_t i = 0; i < j["labels"].size(); ++i)
      labels += (i ? ", " : "") + std::to_string(i) + "=" + j["labels"][i].get<std::string>();
    row("labels", labels);
  } else if (j.contains("num_labels")) {
    row("outputs", str(j["num_labels"]));
  }
  if (j.contains("plan")) {
    const nlohmann::json& p = j["plan"];
    row("plan", "format " + str(p["format_version"]) + ", " + str(p["precision"]) +
                    " weights for " + str(p["device"]) + ", built by bertrt " +
                    str(p["bertrt_version"]) + " at " + str(p["created_utc"]));
    row("plan source", str(p["source"]) + " (" + str(p["source_checksum"]) + ")");
    if (!p["source_weights_format"].get<std::string>().empty())
      row("source weights", str(p["source_weights_format"]));
    row("tuned on GPU", p["tuned_on_gpu"].get<std::string>().empty()
                            ? "(none: CUDA engines take cuBLASLt's heuristic GEMM algorithms)"
                            : str(p["tuned_on_gpu"]) + " (" +
                                  std::to_string(p["gemm_choices"].get<size_t>()) +
                                  " timed GEMM choices)");
    // An 8-bit plan's report, under its precision's name ("int8" | "fp8").
    const std::string precision = p.value("precision", "");
    if (plan::QuantizedPlanFormat(precision) && p.contains(precision)) {
      auto report = plan::ReportFromJson(p[precision]);
      if (report.ok()) row(precision.c_str(), report->Summary());
    }
  }
  const nlohmann::json& t = j["tokenizer"];
  row("tokenizer", str(t["kind"]));
  row("tokenizer vocab", str(t["vocab_size"]));
  if (t.contains("lowercase")) {
    row("lowercase", YesNo(t["lowercase"].get<bool>()));
    row("strip accents", YesNo(t["strip_accents"].get<bool>()));
    row("chinese chars", YesNo(t["handle_chinese_chars"].get<bool>()));
  }
  std::string special;
  for (const auto& [token, id] : t["special_tokens"].items())
    special += (special.empty() ? "" : " ") + token + "=" + id.dump();
  row("special tokens", special);
}

int RunInspect(const InspectOptions& opts) {
  // The notices are part of what inspect shows (the "import" rows).
  auto loaded = LoadForCli(opts.model, opts.import, /*print_notices=*/false);
  if (!loaded.ok()) return Fail(loaded.status(), kExitModelError);
  nlohmann::json j = Describe(*loaded);
  if (const std::string plan_path = PlanPath(opts.model); !plan_path.empty()) {
    auto info = ReadPlanInfo(plan_path);
    if (!info.ok()) return Fail(info.status(), kExitModelError);
    j["plan"] = {{"format_version", info->format_version},
                 {"bertrt_version", info->bertrt_version},
                 {"created_utc", info->created_utc},
                 {"source", info->source},
                 {"source_checksum", info->source_checksum},
                 {"source_weights_format", info->source_weights_format},
                 {"precision", info->precision},
                 {"device", info->device},
                 {"tuned_on_gpu", info->gpu_name},
                 {"gemm_choices", info->gemm_choices},
                 {"max_seq_len", info->max_seq_len},
                 {"max_batch_tokens", info->max_batch_tokens},
                 {"tokenizer", info->tokenizer_kind},
                 {"file_size", info->file_size}};
    if (info->quantization)
      j["plan"][info->precision] = plan::ReportToJson(*info->quantization);
  }
  if (opts.json)
    std::cout << j.dump(2) << "\n";
  else
    PrintText(j, std::cout);
  return kExitOk;
}

}  // namespace

void RegisterInspectCommand(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Show a model's architecture, head, sizes, labels and tokenizer settings, and what the "
      "import did: the weights read, names mapped, config inferred and tensors skipped");
  cmd->add_option("MODEL", opts->model, kModelHelp)->required();
  AddImportOptions(cmd, &opts->import);
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  cmd->callback([opts, &exit_code] { exit_code = RunInspect(*opts); });
}

}  // namespace bertrt::cli

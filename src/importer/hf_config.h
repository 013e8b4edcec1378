// config.json and the sentence-transformers module files -> ModelConfig.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "checkpoint/config_fields.h"

namespace bertrt::importer {

using checkpoint::NoticeFn;

// `path` names the file in messages. Fills everything config.json decides:
// the family (model_type, src/families) and through it the sizes,
// activation and structure; the head (from architectures[0]) and labels.
StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& config, const std::string& path,
                                       const NoticeFn& notice);

// Replaces the classifier's labels (--labels: a file as ReadLabelsFile reads
// it, or a comma-separated list); their count must be the classifier's.
Status ApplyLabels(const std::string& spec, ModelConfig* config, const NoticeFn& notice);

// What modules.json and its module folders say about a sentence-transformers
// directory.
struct SentenceTransformersLayout {
  std::string transformer_dir;  // where config.json and the weights live
  std::vector<Pooling> pooling_modes;
  int embedding_dimension = 0;  // 0 when the pooling config omits it
  // Each Dense module in order: its folder (for the weights) and its config.
  std::vector<std::pair<std::string, DenseSpec>> dense;
  bool normalize = false;
  bool include_prompt = true;  // 1_Pooling's
  std::optional<int> max_seq_length;  // sentence_bert_config.json
  // config_sentence_transformers.json
  std::vector<std::pair<std::string, std::string>> prompts;
  std::string default_prompt_name;
  int truncate_dim = 0;
  // A SparseEncoder (sentence-transformers 5+): MLMTransformer + SpladePooling
  // instead of Transformer + Pooling; its pooling strategy and activation.
  bool splade = false;
  bool splade_sum = false;
  bool splade_log1p_twice = false;
};

// nullopt when `dir` has no modules.json (a plain transformers directory).
StatusOr<std::optional<SentenceTransformersLayout>> ReadSentenceTransformersLayout(
    const std::string& dir);

// Turns `config` into a sentence-embedding model as described by `layout`.
Status ApplySentenceTransformers(const SentenceTransformersLayout& layout,
                                 const NoticeFn& notice, ModelConfig* config);

}  // namespace bertrt::importer

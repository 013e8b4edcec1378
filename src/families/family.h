// A model family, described once: how its config.json maps onto bertrt's
// ModelConfig (sizes and the structure fields both engines run: position
// offset, token types, the classifier's activation) and where its checkpoints
// keep each weight. One file per family (bert.cc, roberta.cc, distilbert.cc, mpnet.cc)
// defines one Family; AllFamilies lists them. The head (architectures[0]'s
// ...ForSequenceClassification etc.) is read the same way for every family
// (importer/hf_config.cc); a family only says where the head's weights are.
//
// Adding a family: a file defining `extern const Family kName` with its
// config mapping and weight names, its entry in families.cc's list, a test
// model from scripts/make_family_models.py with its goldens, and its row in
// README's table of models.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "importer/weight_binder.h"

namespace bertrt::families {

struct Family {
  const char* name;                      // for messages and README: "RoBERTa"
  std::vector<std::string> model_types;  // config.json's model_type values it serves
  // The encoder's component name in task checkpoints ("bert" in
  // "bert.embeddings..."); bare base-model checkpoints have no prefix.
  const char* encoder_name;
  // config.json -> sizes, activation and structure of `c` (not the head).
  Status (*read_config)(const nlohmann::json& j, const std::string& path, ModelConfig* c);
  // Every weight of `c`'s encoder and head, by this family's names.
  Status (*bind_weights)(importer::WeightBinder& b, const ModelConfig& c, ModelWeights* w);
};

const std::vector<const Family*>& AllFamilies();
// nullptr when no family serves `model_type`.
const Family* FindFamily(const std::string& model_type);
// "bert, roberta, xlm-roberta, ..." for messages.
std::string SupportedModelTypes();

// BERT's building blocks that other families share.
// config.json's BERT keys (vocab_size, hidden_size, num_hidden_layers, ...),
// absent ones at BertConfig's defaults but pad_token_id at `default_pad`.
Status ReadBertConfig(const nlohmann::json& j, const std::string& path, int default_pad,
                      ModelConfig* c);
// embeddings.* and encoder.layer.N.* as BERT names them.
Status BindBertEncoder(importer::WeightBinder& b, const ModelConfig& c, ModelWeights* w);
// token classification's `classifier` and QA's `qa_outputs` beside the
// encoder, as every family names them.
Status BindTokenHeads(importer::WeightBinder& b, const ModelConfig& c, ModelWeights* w);

}  // namespace bertrt::families

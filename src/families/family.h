// A model family, described once: how its config.json maps onto bertrt's
// ModelConfig (sizes and the structure fields both engines run: position
// offset, token types, the classifier's activation) and where its checkpoints
// keep each weight. One file per family (bert.cc, roberta.cc, distilbert.cc, mpnet.cc,
// modernbert.cc)
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
#include "checkpoint/weight_binder.h"

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
  Status (*bind_weights)(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w);
  // The word embeddings' name under the encoder, which finds the encoder's
  // prefix in a checkpoint.
  const char* word_embeddings = "embeddings.word_embeddings.weight";
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
// config.json's pad_token_id (`default_pad` when absent) into c->pad_token_id.
Status ReadPadTokenId(const nlohmann::json& j, const std::string& path, int default_pad,
                      ModelConfig* c);
// A family whose checkpoints have no token type table (DistilBERT, MPNet):
// the encoder reads one row of zeros (BindEncoder makes it), whatever the ids.
// Its EncoderNames say token_type_table = false.
void NoTokenTypes(ModelConfig* c);

// Where a family keeps BERT's post-LayerNorm encoder weights: embeddings.*
// as BERT names them, then each layer's under `layers` + N + ".".
struct EncoderNames {
  // Whether checkpoints have embeddings.token_type_embeddings (RoBERTa's
  // one learned row included); without, the encoder reads a row of zeros.
  bool token_type_table;
  const char* layers;           // "encoder.layer."
  const char* layer_count_key;  // config.json's key for the layer count, for messages
  const char* query;            // each a Linear or LayerNorm under the layer
  const char* key;
  const char* value;
  const char* attention_output;
  const char* attention_norm;
  const char* ffn_in;
  const char* ffn_out;
  const char* ffn_norm;
};
inline constexpr EncoderNames kBertEncoderNames{true,
                                                "encoder.layer.",
                                                "num_hidden_layers",
                                                "attention.self.query",
                                                "attention.self.key",
                                                "attention.self.value",
                                                "attention.output.dense",
                                                "attention.output.LayerNorm",
                                                "intermediate.dense",
                                                "output.dense",
                                                "output.LayerNorm"};
// The embeddings and every layer, refusing a checkpoint with more layers
// than config.json says.
Status BindEncoder(checkpoint::WeightBinder& b, const ModelConfig& c, const EncoderNames& names,
                   ModelWeights* w);
// token classification's `classifier` and QA's `qa_outputs` beside the
// encoder, as every family names them.
Status BindTokenHeads(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w);
// Where a family keeps its masked-LM head (SPLADE's): the transform's dense
// and LayerNorm, the decoder to the vocabulary (its weight usually tied to
// the word embeddings and then absent) and the decoder's bias (either name).
struct MaskedLmNames {
  const char* dense;
  const char* norm;
  const char* decoder;
  const char* bias;
};
Status BindMaskedLmHead(checkpoint::WeightBinder& b, const ModelConfig& c, const MaskedLmNames& n,
                        ModelWeights* w);
// RobertaClassificationHead (classifier.dense + tanh + classifier.out_proj
// on the first token) for sequence classification, lm_head for SPLADE, else
// the optional pooler.dense and BindTokenHeads: RoBERTa's heads, which
// MPNet shares.
Status BindRobertaHeads(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w);

}  // namespace bertrt::families

// DistilBERT: BERT's layers under other names and config keys, no token
// types (its tokenizer hands the model none), LayerNorm eps fixed at 1e-12,
// and a sequence classifier that reads pre_classifier + ReLU on [CLS]
// instead of a pooler's tanh.
#include "families/family.h"

#include "core/json_util.h"

namespace bertrt::families {
namespace {

using checkpoint::ReadSize;

Status ReadConfig(const nlohmann::json& j, const std::string& path, ModelConfig* c) {
  RETURN_IF_ERROR(ReadSize(j, "vocab_size", 30522, 1, path, &c->vocab_size));
  RETURN_IF_ERROR(ReadSize(j, "dim", 768, 1, path, &c->hidden_size));
  RETURN_IF_ERROR(ReadSize(j, "n_layers", 6, 1, path, &c->num_layers));
  RETURN_IF_ERROR(ReadSize(j, "n_heads", 12, 1, path, &c->num_heads));
  RETURN_IF_ERROR(ReadSize(j, "hidden_dim", 3072, 1, path, &c->intermediate_size));
  RETURN_IF_ERROR(ReadSize(j, "max_position_embeddings", 512, 1, path,
                           &c->max_position_embeddings));
  if (c->hidden_size % c->num_heads != 0)
    return InvalidArgument(path + ": dim " + std::to_string(c->hidden_size) +
                           " is not a multiple of n_heads " + std::to_string(c->num_heads));
  RETURN_IF_ERROR(ReadPadTokenId(j, path, /*default_pad=*/0, c));
  ASSIGN_OR_RETURN(std::optional<std::string> act, GetString(j, "activation", path));
  ASSIGN_OR_RETURN(c->hidden_act, checkpoint::ParseActivation(act.value_or("gelu"), path));
  c->layer_norm_eps = 1e-12f;  // DistilBERT's, not in its config
  NoTokenTypes(c);
  c->pooler_activation = DenseActivation::kRelu;
  c->mlm_activation = c->hidden_act;  // DistilBertForMaskedLM's vocab_transform
  return Status::Ok();
}

constexpr EncoderNames kNames{false,
                              "transformer.layer.", "n_layers",
                              "attention.q_lin",    "attention.k_lin",
                              "attention.v_lin",    "attention.out_lin",
                              "sa_layer_norm",      "ffn.lin1",
                              "ffn.lin2",           "output_layer_norm"};

Status BindWeights(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  RETURN_IF_ERROR(BindEncoder(b, c, kNames, w));
  const int64_t H = c.hidden_size;
  if (c.head == HeadKind::kSparseEmbedding)
    return BindMaskedLmHead(b, c, {"vocab_transform", "vocab_layer_norm", "vocab_projector",
                                   "vocab_projector.bias"}, w);
  if (c.head == HeadKind::kSequenceClassification) {
    RETURN_IF_ERROR(b.Linear("pre_classifier", H, H, &w->pooler_w, &w->pooler_b, true, true));
    return b.Linear("classifier", c.num_labels, H, &w->classifier_w, &w->classifier_b, true,
                    true);
  }
  return BindTokenHeads(b, c, w);
}

}  // namespace

extern const Family kDistilBert{"DistilBERT", {"distilbert"}, "distilbert", ReadConfig,
                                BindWeights};

}  // namespace bertrt::families

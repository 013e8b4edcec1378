// DistilBERT: BERT's layers under other names and config keys, no token
// types (its tokenizer hands the model none), LayerNorm eps fixed at 1e-12,
// and a sequence classifier that reads pre_classifier + ReLU on [CLS]
// instead of a pooler's tanh.
#include "families/family.h"

#include <algorithm>

#include "importer/json_util.h"

namespace bertrt::families {
namespace {

using importer::ReadSize;

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
  ASSIGN_OR_RETURN(std::optional<int64_t> pad, importer::GetInt(j, "pad_token_id", path));
  c->pad_token_id = static_cast<int>(std::clamp<int64_t>(pad.value_or(0), -1, 1 << 30));
  ASSIGN_OR_RETURN(std::optional<std::string> act, importer::GetString(j, "activation", path));
  ASSIGN_OR_RETURN(c->hidden_act, importer::ParseActivation(act.value_or("gelu"), path));
  c->layer_norm_eps = 1e-12f;  // DistilBERT's, not in its config
  c->type_vocab_size = 1;      // the zero table BindWeights makes
  c->takes_token_types = false;
  c->pooler_activation = DenseActivation::kRelu;
  return Status::Ok();
}

Status BindWeights(importer::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  RETURN_IF_ERROR(
      b.Get({"embeddings.word_embeddings.weight"}, {c.vocab_size, H}, &w->word_embeddings));
  RETURN_IF_ERROR(b.Get({"embeddings.position_embeddings.weight"},
                        {c.max_position_embeddings, H}, &w->position_embeddings));
  // No token types: one row of zeros, so the embedding sum is exactly
  // word + position.
  w->token_type_embeddings = Tensor::ZerosF32({1, H});
  RETURN_IF_ERROR(b.LayerNorm("embeddings.LayerNorm", H, &w->emb_ln_gamma, &w->emb_ln_beta));
  w->layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = "transformer.layer." + std::to_string(i) + ".";
    RETURN_IF_ERROR(b.Linear(p + "attention.q_lin", H, H, &l.query_w, &l.query_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.k_lin", H, H, &l.key_w, &l.key_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.v_lin", H, H, &l.value_w, &l.value_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.out_lin", H, H, &l.attn_out_w, &l.attn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + "sa_layer_norm", H, &l.attn_ln_gamma, &l.attn_ln_beta));
    RETURN_IF_ERROR(b.Linear(p + "ffn.lin1", I, H, &l.ffn_in_w, &l.ffn_in_b));
    RETURN_IF_ERROR(b.Linear(p + "ffn.lin2", H, I, &l.ffn_out_w, &l.ffn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + "output_layer_norm", H, &l.ffn_ln_gamma, &l.ffn_ln_beta));
  }
  const std::string extra = "transformer.layer." + std::to_string(c.num_layers) +
                            ".attention.q_lin.weight";
  if (b.Has(extra))
    return InvalidArgument("checkpoint has " + b.prefix() + extra + " but config.json says " +
                           "n_layers = " + std::to_string(c.num_layers));
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

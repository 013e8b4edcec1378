// BERT (model_type "bert": BERT, MiniLM, BGE, E5, GTE, ...): learned absolute
// positions from 0, token types, post-LayerNorm layers, GELU FFN; the
// sequence classifier reads the pooler (dense + tanh on the first token).
#include "families/family.h"

#include <algorithm>

#include "core/json_util.h"

namespace bertrt::families {

using checkpoint::ReadSize;

Status ReadBertConfig(const nlohmann::json& j, const std::string& path, int default_pad,
                      ModelConfig* c) {
  ASSIGN_OR_RETURN(std::optional<std::string> pos_type,
                   GetString(j, "position_embedding_type", path));
  if (pos_type && *pos_type != "absolute")
    return Unimplemented(path + ": position_embedding_type \"" + *pos_type +
                         "\" is not supported (only \"absolute\")");
  ASSIGN_OR_RETURN(std::optional<bool> is_decoder, GetBool(j, "is_decoder", path));
  if (is_decoder.value_or(false))
    return Unimplemented(path + ": is_decoder = true (a causal decoder) is not supported");

  RETURN_IF_ERROR(ReadSize(j, "vocab_size", 30522, 1, path, &c->vocab_size));
  RETURN_IF_ERROR(ReadSize(j, "hidden_size", 768, 1, path, &c->hidden_size));
  RETURN_IF_ERROR(ReadSize(j, "num_hidden_layers", 12, 1, path, &c->num_layers));
  RETURN_IF_ERROR(ReadSize(j, "num_attention_heads", 12, 1, path, &c->num_heads));
  RETURN_IF_ERROR(ReadSize(j, "intermediate_size", 3072, 1, path, &c->intermediate_size));
  RETURN_IF_ERROR(ReadSize(j, "max_position_embeddings", 512, 1, path,
                           &c->max_position_embeddings));
  RETURN_IF_ERROR(ReadSize(j, "type_vocab_size", 2, 1, path, &c->type_vocab_size));
  if (c->hidden_size % c->num_heads != 0)
    return InvalidArgument(path + ": hidden_size " + std::to_string(c->hidden_size) +
                           " is not a multiple of num_attention_heads " +
                           std::to_string(c->num_heads));
  RETURN_IF_ERROR(ReadPadTokenId(j, path, default_pad, c));
  ASSIGN_OR_RETURN(std::optional<double> eps, GetNumber(j, "layer_norm_eps", path));
  c->layer_norm_eps = static_cast<float>(eps.value_or(1e-12));
  if (!(c->layer_norm_eps >= 0.0f))
    return InvalidArgument(path + ": layer_norm_eps must be non-negative");
  ASSIGN_OR_RETURN(std::optional<std::string> act, GetString(j, "hidden_act", path));
  ASSIGN_OR_RETURN(c->hidden_act, checkpoint::ParseActivation(act.value_or("gelu"), path));
  return Status::Ok();
}

Status ReadPadTokenId(const nlohmann::json& j, const std::string& path, int default_pad,
                      ModelConfig* c) {
  ASSIGN_OR_RETURN(std::optional<int64_t> pad, GetInt(j, "pad_token_id", path));
  // Range-checked by the importer against the vocabulary.
  c->pad_token_id = static_cast<int>(std::clamp<int64_t>(pad.value_or(default_pad), -1, 1 << 30));
  return Status::Ok();
}

void NoTokenTypes(ModelConfig* c) {
  c->type_vocab_size = 1;
  c->takes_token_types = false;
}

Status BindEncoder(checkpoint::WeightBinder& b, const ModelConfig& c, const EncoderNames& n,
                   ModelWeights* w) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  RETURN_IF_ERROR(
      b.Get({"embeddings.word_embeddings.weight"}, {c.vocab_size, H}, &w->word_embeddings));
  RETURN_IF_ERROR(b.Get({"embeddings.position_embeddings.weight"},
                        {c.max_position_embeddings, H}, &w->position_embeddings));
  if (n.token_type_table) {
    // RoBERTa's one-row table is learned: every token adds it.
    RETURN_IF_ERROR(b.Get({"embeddings.token_type_embeddings.weight"}, {c.type_vocab_size, H},
                          &w->token_type_embeddings));
  } else {
    // One row of zeros: the embedding sum is exactly word + position.
    w->token_type_embeddings = Tensor::ZerosF32({1, H});
  }
  RETURN_IF_ERROR(b.LayerNorm("embeddings.LayerNorm", H, &w->emb_ln_gamma, &w->emb_ln_beta));

  w->layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = n.layers + std::to_string(i) + ".";
    RETURN_IF_ERROR(b.Linear(p + n.query, H, H, &l.query_w, &l.query_b));
    RETURN_IF_ERROR(b.Linear(p + n.key, H, H, &l.key_w, &l.key_b));
    RETURN_IF_ERROR(b.Linear(p + n.value, H, H, &l.value_w, &l.value_b));
    RETURN_IF_ERROR(b.Linear(p + n.attention_output, H, H, &l.attn_out_w, &l.attn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + n.attention_norm, H, &l.attn_ln_gamma, &l.attn_ln_beta));
    RETURN_IF_ERROR(b.Linear(p + n.ffn_in, I, H, &l.ffn_in_w, &l.ffn_in_b));
    RETURN_IF_ERROR(b.Linear(p + n.ffn_out, H, I, &l.ffn_out_w, &l.ffn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + n.ffn_norm, H, &l.ffn_ln_gamma, &l.ffn_ln_beta));
  }
  const std::string extra =
      n.layers + std::to_string(c.num_layers) + "." + n.query + ".weight";
  if (b.Has(extra))
    return InvalidArgument("checkpoint has " + b.prefix() + extra + " but config.json says " +
                           n.layer_count_key + " = " + std::to_string(c.num_layers));
  return Status::Ok();
}

Status BindMaskedLmHead(checkpoint::WeightBinder& b, const ModelConfig& c, const MaskedLmNames& n,
                        ModelWeights* w) {
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const char* why = "SPLADE (a ...ForMaskedLM architecture) reads the masked-LM head";
  RETURN_IF_ERROR(b.Linear(n.dense, H, H, &w->mlm_dense_w, &w->mlm_dense_b, true, true, why));
  RETURN_IF_ERROR(b.LayerNorm(n.norm, H, &w->mlm_ln_gamma, &w->mlm_ln_beta, /*head=*/true));
  // Absent when tied to the word embeddings (save_pretrained drops the copy).
  const std::string decoder = n.decoder;
  RETURN_IF_ERROR(b.Get({decoder + ".weight"}, {V, H}, &w->mlm_decoder_w, false, true));
  return b.Get({n.bias, decoder + ".bias"}, {V}, &w->mlm_decoder_b, true, true, why);
}

Status BindTokenHeads(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  const int64_t H = c.hidden_size;
  if (c.head == HeadKind::kTokenClassification)
    return b.Linear("classifier", c.num_labels, H, &w->classifier_w, &w->classifier_b, true,
                    true);
  if (c.head == HeadKind::kQuestionAnswering)
    return b.Linear("qa_outputs", 2, H, &w->classifier_w, &w->classifier_b, true, true);
  return Status::Ok();
}

namespace {

Status ReadConfig(const nlohmann::json& j, const std::string& path, ModelConfig* c) {
  RETURN_IF_ERROR(ReadBertConfig(j, path, /*default_pad=*/0, c));
  c->mlm_activation = c->hidden_act;  // BertPredictionHeadTransform's
  return Status::Ok();
}

Status BindWeights(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  RETURN_IF_ERROR(BindEncoder(b, c, kBertEncoderNames, w));
  if (c.head == HeadKind::kSparseEmbedding)
    return BindMaskedLmHead(b, c,
                            {"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                             "cls.predictions.decoder", "cls.predictions.bias"},
                            w);
  // Sequence classification feeds the classifier through the pooler, so a
  // checkpoint without it (a common converter bug) cannot be served.
  const int64_t H = c.hidden_size;
  const bool classifies = c.head == HeadKind::kSequenceClassification;
  RETURN_IF_ERROR(b.Linear("pooler.dense", H, H, &w->pooler_w, &w->pooler_b, classifies, false,
                           "sequence classification needs the pooler; was it dropped when "
                           "the checkpoint was converted?"));
  if (classifies)
    return b.Linear("classifier", c.num_labels, H, &w->classifier_w, &w->classifier_b, true,
                    true);
  return BindTokenHeads(b, c, w);
}

}  // namespace

extern const Family kBert{"BERT", {"bert"}, "bert", ReadConfig, BindWeights};

}  // namespace bertrt::families

// ModernBERT (answerdotai/ModernBERT-base/-large, gte-modernbert, modernbert-embed,
// ModernBERT rerankers): pre-LayerNorm layers (the first without its attention
// LayerNorm) and a final LayerNorm, rotary positions (a theta for the global
// layers and one for the local ones) instead of a position table, a fused Wqkv,
// GeGLU FFN (Wi gives both halves), local attention (a window of
// local_attention tokens, +-half of it) in every layer but each
// global_attn_every_n_layers-th, no biases and no LayerNorm biases by default
// (norm_bias, attention_bias, mlp_bias, classifier_bias), no token types, and a
// classifier that reads the first token or the mean of all through a
// prediction head (dense + activation + LayerNorm).
#include "families/family.h"

#include "core/json_util.h"

namespace bertrt::families {
namespace {

using checkpoint::ReadSize;

// A rotary theta: rope_parameters[layer_type].rope_theta (transformers 5's
// layout), else the older key, else its default.
StatusOr<float> RopeTheta(const nlohmann::json& j, const std::string& path, const char* layer_type,
                          const char* old_key, double fallback) {
  auto params = j.find("rope_parameters");
  if (params != j.end() && params->is_object() && params->contains(layer_type)) {
    const nlohmann::json& p = (*params)[layer_type];
    ASSIGN_OR_RETURN(std::optional<double> theta, GetNumber(p, "rope_theta", path));
    ASSIGN_OR_RETURN(std::optional<std::string> type, GetString(p, "rope_type", path));
    if (type && *type != "default")
      return Unimplemented(path + ": rope_type \"" + *type + "\" for " + layer_type +
                           " layers is not supported (\"default\" is)");
    if (theta) fallback = *theta;
  } else {
    ASSIGN_OR_RETURN(std::optional<double> theta, GetNumber(j, old_key, path));
    if (theta) fallback = *theta;
  }
  if (!(fallback > 0 && fallback < 1e12))
    return InvalidArgument(path + ": rope theta " + std::to_string(fallback) + " is out of range");
  return static_cast<float>(fallback);
}

// "gelu" (erf) or its tanh forms, as transformers' ACT2FN names them.
StatusOr<HiddenAct> GeluForm(const nlohmann::json& j, const char* key, const std::string& path) {
  ASSIGN_OR_RETURN(std::optional<std::string> act, GetString(j, key, path));
  ASSIGN_OR_RETURN(HiddenAct a, checkpoint::ParseActivation(act.value_or("gelu"), path));
  if (a == HiddenAct::kRelu)
    return Unimplemented(path + ": " + key + " \"" + *act +
                         "\" is not supported for ModernBERT (its GELU forms are)");
  return a;
}

Status ReadConfig(const nlohmann::json& j, const std::string& path, ModelConfig* c) {
  RETURN_IF_ERROR(ReadSize(j, "vocab_size", 50368, 1, path, &c->vocab_size));
  RETURN_IF_ERROR(ReadSize(j, "hidden_size", 768, 1, path, &c->hidden_size));
  RETURN_IF_ERROR(ReadSize(j, "num_hidden_layers", 22, 1, path, &c->num_layers));
  RETURN_IF_ERROR(ReadSize(j, "num_attention_heads", 12, 1, path, &c->num_heads));
  RETURN_IF_ERROR(ReadSize(j, "intermediate_size", 1152, 1, path, &c->intermediate_size));
  RETURN_IF_ERROR(ReadSize(j, "max_position_embeddings", 8192, 1, path,
                           &c->max_position_embeddings));
  if (c->hidden_size % c->num_heads != 0 || c->head_dim() % 2 != 0)
    return InvalidArgument(path + ": hidden_size " + std::to_string(c->hidden_size) +
                           " must split into num_attention_heads " + std::to_string(c->num_heads) +
                           " heads of an even size (rotary positions rotate pairs)");
  RETURN_IF_ERROR(ReadPadTokenId(j, path, /*default_pad=*/50283, c));
  ASSIGN_OR_RETURN(std::optional<double> eps, GetNumber(j, "norm_eps", path));
  c->layer_norm_eps = static_cast<float>(eps.value_or(1e-5));
  if (!(c->layer_norm_eps >= 0.0f)) return InvalidArgument(path + ": norm_eps must be non-negative");
  ASSIGN_OR_RETURN(c->hidden_act, GeluForm(j, "hidden_activation", path));
  ASSIGN_OR_RETURN(c->mlm_activation, GeluForm(j, "classifier_activation", path));
  if (c->mlm_activation != HiddenAct::kGelu)
    return Unimplemented(path + ": classifier_activation must be \"gelu\" (the exact GELU)");
  c->pooler_activation = DenseActivation::kGelu;
  c->prediction_head = true;
  ASSIGN_OR_RETURN(std::optional<std::string> pooling, GetString(j, "classifier_pooling", path));
  if (pooling && *pooling != "cls" && *pooling != "mean")
    return InvalidArgument(path + ": classifier_pooling \"" + *pooling +
                           "\" is not \"cls\" or \"mean\"");
  c->classifier_mean_pooling = pooling && *pooling == "mean";

  // Attention: global every n-th layer from the first, local (a window of
  // local_attention tokens) between.
  int every = 3, window = 128;
  RETURN_IF_ERROR(ReadSize(j, "global_attn_every_n_layers", 3, 1, path, &every));
  RETURN_IF_ERROR(ReadSize(j, "local_attention", 128, 2, path, &window));
  c->global_attention_every = every;
  c->local_window = every > 1 ? window / 2 : 0;
  if (auto types = j.find("layer_types"); types != j.end() && types->is_array()) {
    if (types->size() != static_cast<size_t>(c->num_layers))
      return InvalidArgument(path + ": layer_types has " + std::to_string(types->size()) +
                             " entries for " + std::to_string(c->num_layers) + " layers");
    for (int i = 0; i < c->num_layers; ++i) {
      const nlohmann::json& t = (*types)[static_cast<size_t>(i)];
      const char* want = c->local_layer(i) ? "sliding_attention" : "full_attention";
      if (!t.is_string() || t.get<std::string>() != want)
        return Unimplemented(path + ": layer_types[" + std::to_string(i) + "] is " + t.dump() +
                             ", not \"" + want + "\" as global_attn_every_n_layers = " +
                             std::to_string(every) + " says; other layouts are not supported");
    }
  }
  ASSIGN_OR_RETURN(c->rope_theta,
                   RopeTheta(j, path, "full_attention", "global_rope_theta", 160000.0));
  ASSIGN_OR_RETURN(c->local_rope_theta,
                   RopeTheta(j, path, "sliding_attention", "local_rope_theta", c->rope_theta));
  c->pre_norm = true;
  c->gated_ffn = true;
  NoTokenTypes(c);
  return Status::Ok();
}

Status BindWeights(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  // attention_bias, mlp_bias, norm_bias, classifier_bias and decoder_bias
  // false leave them out of the checkpoint.
  b.AbsentBiasesReadZeros();
  RETURN_IF_ERROR(b.Get({"embeddings.tok_embeddings.weight"}, {c.vocab_size, H},
                        &w->word_embeddings));
  w->token_type_embeddings = Tensor::ZerosF32({1, H});  // NoTokenTypes
  RETURN_IF_ERROR(b.LayerNorm("embeddings.norm", H, &w->emb_ln_gamma, &w->emb_ln_beta));
  w->layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    // The first layer's attention reads the embeddings' LayerNorm (its
    // attn_norm is an Identity): left empty.
    if (i > 0)
      RETURN_IF_ERROR(b.LayerNorm(p + "attn_norm", H, &l.attn_ln_gamma, &l.attn_ln_beta));
    Tensor qkv_w, qkv_b;
    RETURN_IF_ERROR(b.Linear(p + "attn.Wqkv", 3 * H, H, &qkv_w, &qkv_b));
    // Wqkv's rows are Q's, K's, then V's (transformers views them as [3, heads, head_dim]).
    l.query_w = qkv_w.Rows(0, H), l.key_w = qkv_w.Rows(H, H), l.value_w = qkv_w.Rows(2 * H, H);
    l.query_b = qkv_b.Rows(0, H), l.key_b = qkv_b.Rows(H, H), l.value_b = qkv_b.Rows(2 * H, H);
    RETURN_IF_ERROR(b.Linear(p + "attn.Wo", H, H, &l.attn_out_w, &l.attn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + "mlp_norm", H, &l.ffn_ln_gamma, &l.ffn_ln_beta));
    RETURN_IF_ERROR(b.Linear(p + "mlp.Wi", 2 * I, H, &l.ffn_in_w, &l.ffn_in_b));
    RETURN_IF_ERROR(b.Linear(p + "mlp.Wo", H, I, &l.ffn_out_w, &l.ffn_out_b));
  }
  const std::string extra = "layers." + std::to_string(c.num_layers) + ".attn.Wqkv.weight";
  if (b.Has(extra))
    return InvalidArgument("checkpoint has " + b.prefix() + extra + " but config.json says " +
                           "num_hidden_layers = " + std::to_string(c.num_layers));
  RETURN_IF_ERROR(b.LayerNorm("final_norm", H, &w->final_ln_gamma, &w->final_ln_beta));
  if (c.head == HeadKind::kSparseEmbedding) {
    // ModernBertForMaskedLM: head (dense + act + norm), then the decoder.
    RETURN_IF_ERROR(b.Linear("head.dense", H, H, &w->mlm_dense_w, &w->mlm_dense_b,
                             /*required=*/true, /*head=*/true));
    RETURN_IF_ERROR(
        b.LayerNorm("head.norm", H, &w->mlm_ln_gamma, &w->mlm_ln_beta, /*head=*/true));
    RETURN_IF_ERROR(b.Get({"decoder.weight"}, {c.vocab_size, H}, &w->mlm_decoder_w, false, true));
    RETURN_IF_ERROR(b.Get({"decoder.bias"}, {c.vocab_size}, &w->mlm_decoder_b, false, true));
    if (w->mlm_decoder_b.empty()) w->mlm_decoder_b = Tensor::ZerosF32({c.vocab_size});
    return Status::Ok();
  }
  if (c.head == HeadKind::kBase || c.head == HeadKind::kSentenceEmbedding) return Status::Ok();
  // ModernBertPredictionHead on the pooled row (sequence classification) or
  // on every token (token classification, QA: start and end logits), then
  // the classifier, named so for every head.
  RETURN_IF_ERROR(b.Linear("head.dense", H, H, &w->pooler_w, &w->pooler_b, /*required=*/true,
                           /*head=*/true));
  RETURN_IF_ERROR(
      b.LayerNorm("head.norm", H, &w->pooler_ln_gamma, &w->pooler_ln_beta, /*head=*/true));
  return b.Linear("classifier", c.num_labels, H, &w->classifier_w, &w->classifier_b,
                  /*required=*/true, /*head=*/true);
}

}  // namespace

extern const Family kModernBert{"ModernBERT", {"modernbert"}, "model", ReadConfig, BindWeights,
                                "embeddings.tok_embeddings.weight"};

}  // namespace bertrt::families

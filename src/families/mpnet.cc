// MPNet (all-mpnet-base-v2, multi-qa-mpnet): BERT's post-LayerNorm layers
// under other names, RoBERTa's positions (after padding_idx) and
// classification head, no token types, and a relative position bias: each
// head adds a learned value per T5-style bucket of the key-query distance
// (encoder.relative_attention_bias, shared by every layer) to its scores.
#include "families/family.h"

#include "importer/json_util.h"

namespace bertrt::families {
namespace {

Status ReadConfig(const nlohmann::json& j, const std::string& path, ModelConfig* c) {
  // MPNetConfig's defaults: BERT's keys, pad_token_id 1.
  RETURN_IF_ERROR(ReadBertConfig(j, path, /*default_pad=*/1, c));
  RETURN_IF_ERROR(importer::ReadSize(j, "relative_attention_num_buckets", 32, 2, path,
                                     &c->relative_attention_buckets));
  c->position_offset = c->pad_token_id + 1;
  c->type_vocab_size = 1;  // the zero table BindWeights makes
  c->takes_token_types = false;
  return Status::Ok();
}

Status BindWeights(importer::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  RETURN_IF_ERROR(
      b.Get({"embeddings.word_embeddings.weight"}, {c.vocab_size, H}, &w->word_embeddings));
  RETURN_IF_ERROR(b.Get({"embeddings.position_embeddings.weight"},
                        {c.max_position_embeddings, H}, &w->position_embeddings));
  w->token_type_embeddings = Tensor::ZerosF32({1, H});
  RETURN_IF_ERROR(b.LayerNorm("embeddings.LayerNorm", H, &w->emb_ln_gamma, &w->emb_ln_beta));
  RETURN_IF_ERROR(b.Get({"encoder.relative_attention_bias.weight"},
                        {c.relative_attention_buckets, c.num_heads}, &w->relative_attention_bias));
  w->layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    RETURN_IF_ERROR(b.Linear(p + "attention.attn.q", H, H, &l.query_w, &l.query_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.attn.k", H, H, &l.key_w, &l.key_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.attn.v", H, H, &l.value_w, &l.value_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.attn.o", H, H, &l.attn_out_w, &l.attn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + "attention.LayerNorm", H, &l.attn_ln_gamma, &l.attn_ln_beta));
    RETURN_IF_ERROR(b.Linear(p + "intermediate.dense", I, H, &l.ffn_in_w, &l.ffn_in_b));
    RETURN_IF_ERROR(b.Linear(p + "output.dense", H, I, &l.ffn_out_w, &l.ffn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + "output.LayerNorm", H, &l.ffn_ln_gamma, &l.ffn_ln_beta));
  }
  const std::string extra = "encoder.layer." + std::to_string(c.num_layers) + ".attention.attn.q.weight";
  if (b.Has(extra))
    return InvalidArgument("checkpoint has " + b.prefix() + extra + " but config.json says " +
                           "num_hidden_layers = " + std::to_string(c.num_layers));
  if (c.head == HeadKind::kSequenceClassification) {
    // MPNetClassificationHead: dense + tanh + out_proj on <s>, as RoBERTa's.
    RETURN_IF_ERROR(b.Linear("classifier.dense", H, H, &w->pooler_w, &w->pooler_b, true, true));
    return b.Linear("classifier.out_proj", c.num_labels, H, &w->classifier_w, &w->classifier_b,
                    true, true);
  }
  RETURN_IF_ERROR(b.Linear("pooler.dense", H, H, &w->pooler_w, &w->pooler_b, false));
  return BindTokenHeads(b, c, w);
}

}  // namespace

extern const Family kMpnet{"MPNet", {"mpnet"}, "mpnet", ReadConfig, BindWeights};

}  // namespace bertrt::families

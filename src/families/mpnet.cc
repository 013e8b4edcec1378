// MPNet (all-mpnet-base-v2, multi-qa-mpnet): BERT's post-LayerNorm layers
// under other names, RoBERTa's positions (after padding_idx) and
// classification head, no token types, and a relative position bias: each
// head adds a learned value per T5-style bucket of the key-query distance
// (encoder.relative_attention_bias, shared by every layer) to its scores.
#include "families/family.h"

#include "core/json_util.h"

namespace bertrt::families {
namespace {

Status ReadConfig(const nlohmann::json& j, const std::string& path, ModelConfig* c) {
  // MPNetConfig's defaults: BERT's keys, pad_token_id 1.
  RETURN_IF_ERROR(ReadBertConfig(j, path, /*default_pad=*/1, c));
  RETURN_IF_ERROR(checkpoint::ReadSize(j, "relative_attention_num_buckets", 32, 2, path,
                                     &c->relative_attention_buckets));
  c->position_offset = c->pad_token_id + 1;
  NoTokenTypes(c);
  return Status::Ok();
}

constexpr EncoderNames kNames{false,
                              "encoder.layer.",      "num_hidden_layers",
                              "attention.attn.q",    "attention.attn.k",
                              "attention.attn.v",    "attention.attn.o",
                              "attention.LayerNorm", "intermediate.dense",
                              "output.dense",        "output.LayerNorm"};

Status BindWeights(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  RETURN_IF_ERROR(BindEncoder(b, c, kNames, w));
  RETURN_IF_ERROR(b.Get({"encoder.relative_attention_bias.weight"},
                        {c.relative_attention_buckets, c.num_heads}, &w->relative_attention_bias));
  // MPNetClassificationHead is RoBERTa's: dense + tanh + out_proj on <s>.
  return BindRobertaHeads(b, c, w);
}

}  // namespace

extern const Family kMpnet{"MPNet", {"mpnet"}, "mpnet", ReadConfig, BindWeights};

}  // namespace bertrt::families

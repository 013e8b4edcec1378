// RoBERTa, XLM-RoBERTa and CamemBERT (multilingual-e5, bge-m3,
// bge-reranker, most cross-encoders): BERT's encoder and weight names, but
// - positions start after padding_idx: token i reads row pad_token_id + 1 + i
//   (transformers counts only non-pad tokens; bertrt's sequences hold no
//   padding, so the two agree);
// - the tokenizer hands the model no token types (the table has one row);
// - RobertaClassificationHead: dense + tanh + out_proj on <s>, the same
//   computation as BERT's pooler + classifier, under its own names.
#include "families/family.h"

namespace bertrt::families {

Status BindRobertaHeads(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  const int64_t H = c.hidden_size;
  if (c.head == HeadKind::kSequenceClassification) {
    RETURN_IF_ERROR(b.Linear("classifier.dense", H, H, &w->pooler_w, &w->pooler_b, true, true));
    return b.Linear("classifier.out_proj", c.num_labels, H, &w->classifier_w, &w->classifier_b,
                    true, true);
  }
  // RobertaLMHead (MPNetLMHead the same): dense + GELU + layer_norm + decoder.
  if (c.head == HeadKind::kSparseEmbedding)
    return BindMaskedLmHead(b, c, {"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder",
                                   "lm_head.bias"}, w);
  // RobertaModel's pooler (dense + tanh on <s>), when it was saved.
  RETURN_IF_ERROR(b.Linear("pooler.dense", H, H, &w->pooler_w, &w->pooler_b, false));
  return BindTokenHeads(b, c, w);
}

namespace {

Status ReadConfig(const nlohmann::json& j, const std::string& path, ModelConfig* c) {
  // RobertaConfig's and XLMRobertaConfig's pad_token_id default is 1.
  RETURN_IF_ERROR(ReadBertConfig(j, path, /*default_pad=*/1, c));
  c->position_offset = c->pad_token_id + 1;
  c->takes_token_types = false;
  return Status::Ok();
}

Status BindWeights(checkpoint::WeightBinder& b, const ModelConfig& c, ModelWeights* w) {
  RETURN_IF_ERROR(BindEncoder(b, c, kBertEncoderNames, w));
  return BindRobertaHeads(b, c, w);
}

}  // namespace

extern const Family kRoberta{
    "RoBERTa / XLM-RoBERTa / CamemBERT", {"roberta", "xlm-roberta", "camembert"}, "roberta",
    ReadConfig, BindWeights};

}  // namespace bertrt::families

#include "bertrt/model.h"

namespace bertrt {

const char* HeadKindName(HeadKind h) {
  switch (h) {
    case HeadKind::kBase: return "base";
    case HeadKind::kSequenceClassification: return "sequence_classification";
    case HeadKind::kTokenClassification: return "token_classification";
    case HeadKind::kQuestionAnswering: return "question_answering";
    case HeadKind::kSentenceEmbedding: return "sentence_embedding";
  }
  return "?";
}

const char* HiddenActName(HiddenAct a) {
  switch (a) {
    case HiddenAct::kGelu: return "gelu";
    case HiddenAct::kGeluTanh: return "gelu_new";
    case HiddenAct::kRelu: return "relu";
  }
  return "?";
}

const char* PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kCls: return "cls";
    case Pooling::kMean: return "mean";
    case Pooling::kMax: return "max";
  }
  return "?";
}

size_t Model::ParameterCount() const {
  size_t n = 0;
  auto add = [&n](const Tensor& t) { n += t.empty() ? 0 : static_cast<size_t>(t.numel()); };
  const ModelWeights& w = weights;
  for (const Tensor* t : {&w.word_embeddings, &w.position_embeddings, &w.token_type_embeddings,
                          &w.emb_ln_gamma, &w.emb_ln_beta, &w.pooler_w, &w.pooler_b,
                          &w.classifier_w, &w.classifier_b})
    add(*t);
  for (const LayerWeights& l : w.layers)
    for (const Tensor* t : {&l.query_w, &l.query_b, &l.key_w, &l.key_b, &l.value_w, &l.value_b,
                            &l.attn_out_w, &l.attn_out_b, &l.attn_ln_gamma, &l.attn_ln_beta,
                            &l.ffn_in_w, &l.ffn_in_b, &l.ffn_out_w, &l.ffn_out_b,
                            &l.ffn_ln_gamma, &l.ffn_ln_beta})
      add(*t);
  return n;
}

}  // namespace bertrt

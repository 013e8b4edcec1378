#include "bertrt/model.h"

#include <algorithm>

#include "bertrt/quantized_weights.h"
#include "core/half.h"

namespace bertrt {

const char* HeadKindName(HeadKind h) {
  switch (h) {
    case HeadKind::kBase: return "base";
    case HeadKind::kSequenceClassification: return "sequence_classification";
    case HeadKind::kTokenClassification: return "token_classification";
    case HeadKind::kQuestionAnswering: return "question_answering";
    case HeadKind::kSentenceEmbedding: return "sentence_embedding";
    case HeadKind::kSparseEmbedding: return "sparse_embedding";
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
    case Pooling::kMeanSqrtLen: return "mean_sqrt_len_tokens";
    case Pooling::kWeightedMean: return "weightedmean";
    case Pooling::kLastToken: return "lasttoken";
  }
  return "?";
}

const char* DenseActivationName(DenseActivation a) {
  switch (a) {
    case DenseActivation::kIdentity: return "identity";
    case DenseActivation::kTanh: return "tanh";
    case DenseActivation::kRelu: return "relu";
    case DenseActivation::kGelu: return "gelu";
    case DenseActivation::kSigmoid: return "sigmoid";
  }
  return "?";
}

int ModelConfig::embedding_width() const {
  const int width = dense_output_width();
  return truncate_dim > 0 ? std::min(truncate_dim, width) : width;
}

std::string ModelConfig::LabelName(int i) const {
  return i >= 0 && i < static_cast<int>(labels.size()) && !labels[i].empty()
             ? labels[i]
             : "LABEL_" + std::to_string(i);
}

StatusOr<std::string> ModelConfig::PromptText(const std::optional<std::string>& name) const {
  if (!name && default_prompt_name.empty()) return std::string();
  const std::string& wanted = name ? *name : default_prompt_name;
  for (const auto& [n, text] : prompts)
    if (n == wanted) return text;
  std::string names;
  for (const auto& p : prompts) names += (names.empty() ? "\"" : ", \"") + p.first + "\"";
  return InvalidArgument("prompt_name \"" + wanted + "\" is not one of the model's prompts (" +
                         (names.empty() ? std::string("it has none") : names) +
                         "; config_sentence_transformers.json lists them)");
}

namespace {

// ModelWeights::All for const and mutable weights alike.
template <typename TensorT, typename Weights>
std::vector<TensorT*> AllTensors(Weights& w) {
  std::vector<TensorT*> all = {&w.word_embeddings, &w.position_embeddings,
                               &w.token_type_embeddings, &w.emb_ln_gamma, &w.emb_ln_beta,
                               &w.pooler_w, &w.pooler_b, &w.classifier_w, &w.classifier_b,
                               &w.relative_attention_bias, &w.mlm_dense_w, &w.mlm_dense_b,
                               &w.mlm_ln_gamma, &w.mlm_ln_beta, &w.mlm_decoder_w,
                               &w.mlm_decoder_b, &w.pooler_ln_gamma, &w.pooler_ln_beta,
                               &w.final_ln_gamma, &w.final_ln_beta};
  for (auto& l : w.layers)
    all.insert(all.end(), {&l.query_w, &l.query_b, &l.key_w, &l.key_b, &l.value_w, &l.value_b,
                           &l.attn_out_w, &l.attn_out_b, &l.attn_ln_gamma, &l.attn_ln_beta,
                           &l.ffn_in_w, &l.ffn_in_b, &l.ffn_out_w, &l.ffn_out_b,
                           &l.ffn_ln_gamma, &l.ffn_ln_beta});
  for (auto& d : w.dense) all.insert(all.end(), {&d.w, &d.b});
  return all;
}

}  // namespace

bool GemmChoice::AlgoWellFormed() const {
  return algo.size() == 128 && algo.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::vector<const Tensor*> ModelWeights::All() const { return AllTensors<const Tensor>(*this); }
std::vector<Tensor*> ModelWeights::All() { return AllTensors<Tensor>(*this); }

size_t Model::ParameterCount() const {
  size_t n = 0;
  for (const Tensor* t : weights.All()) n += t->empty() ? 0 : static_cast<size_t>(t->numel());
  if (quantized)
    for (const auto& [name, linear] : quantized->linears)
      n += static_cast<size_t>(linear.weights.numel());
  return n;
}

std::shared_ptr<const Model> WithFloat32Weights(std::shared_ptr<const Model> model) {
  const std::vector<const Tensor*> all = model->weights.All();
  if (std::all_of(all.begin(), all.end(),
                  [](const Tensor* t) { return t->empty() || t->dtype() == DType::kF32; }))
    return model;
  auto widened = std::make_shared<Model>(*model);
  // The copy's tensors are in the same order as the original's.
  const std::vector<Tensor*> dst = widened->weights.All();
  for (size_t i = 0; i < all.size(); ++i) {
    const Tensor& t = *all[i];
    if (t.empty() || t.dtype() == DType::kF32) continue;
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(t.numel()));
    WidenToFloat(t.dtype(), t.raw(), buf->size(), buf->data());
    const float* data = buf->data();
    *dst[i] = Tensor(DType::kF32, t.shape(), data, std::move(buf));
  }
  return widened;
}

}  // namespace bertrt

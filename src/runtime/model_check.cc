#include "runtime/model_check.h"

#include <string>
#include <vector>

namespace bertrt {
namespace {

Status CheckConfig(const ModelConfig& c, size_t num_layer_weights) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.intermediate_size <= 0 || c.max_position_embeddings <= 0 || c.type_vocab_size <= 0)
    return InvalidArgument("model: vocab, hidden, layer, head, intermediate, position and "
                           "type-vocab sizes must all be positive");
  if (c.hidden_size % c.num_heads != 0)
    return InvalidArgument("model: hidden_size " + std::to_string(c.hidden_size) +
                           " is not divisible by num_heads " + std::to_string(c.num_heads));
  if (num_layer_weights != static_cast<size_t>(c.num_layers))
    return InvalidArgument("model: config has " + std::to_string(c.num_layers) +
                           " layers but the weights have " + std::to_string(num_layer_weights));
  return Status::Ok();
}

}  // namespace

Status CheckTensor(const Tensor& t, const std::vector<int64_t>& shape, const std::string& name,
                   bool half_ok) {
  if (t.empty()) return InvalidArgument("model: " + name + " is missing");
  const bool dtype_ok = half_ok ? IsWeightDType(t.dtype()) : t.dtype() == DType::kF32;
  if (!dtype_ok || t.shape() != shape)
    return InvalidArgument("model: " + name + " is " + DTypeName(t.dtype()) +
                           ShapeToString(t.shape()) + ", expected " +
                           (half_ok ? "F32/F16/BF16" : "F32") + ShapeToString(shape));
  return Status::Ok();
}

bool HeadUsesPooler(const Model& model) {
  const HeadKind head = model.config.head;
  return head == HeadKind::kSequenceClassification ||
         (head == HeadKind::kBase && !model.weights.pooler_w.empty());
}

Status CheckModel(const Model& model) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  RETURN_IF_ERROR(CheckConfig(c, w.layers.size()));
  const int64_t h = c.hidden_size;
  RETURN_IF_ERROR(CheckTensor(w.word_embeddings, {c.vocab_size, h}, "word_embeddings", true));
  RETURN_IF_ERROR(CheckTensor(w.position_embeddings, {c.max_position_embeddings, h},
                              "position_embeddings", true));
  RETURN_IF_ERROR(CheckTensor(w.token_type_embeddings, {c.type_vocab_size, h},
                              "token_type_embeddings", true));
  RETURN_IF_ERROR(CheckTensor(w.emb_ln_gamma, {h}, "embeddings LayerNorm weight"));
  RETURN_IF_ERROR(CheckTensor(w.emb_ln_beta, {h}, "embeddings LayerNorm bias"));
  const int64_t inter = c.intermediate_size;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const std::string p = "layer " + std::to_string(i) + " ";
    const LayerWeights& l = w.layers[i];
    // Linear weights and biases may be a plan's fp16/bf16 (see Model).
    RETURN_IF_ERROR(CheckTensor(l.query_w, {h, h}, p + "query weight", true));
    RETURN_IF_ERROR(CheckTensor(l.key_w, {h, h}, p + "key weight", true));
    RETURN_IF_ERROR(CheckTensor(l.value_w, {h, h}, p + "value weight", true));
    RETURN_IF_ERROR(CheckTensor(l.query_b, {h}, p + "query bias", true));
    RETURN_IF_ERROR(CheckTensor(l.key_b, {h}, p + "key bias", true));
    RETURN_IF_ERROR(CheckTensor(l.value_b, {h}, p + "value bias", true));
    RETURN_IF_ERROR(CheckTensor(l.attn_out_w, {h, h}, p + "attention output weight", true));
    RETURN_IF_ERROR(CheckTensor(l.attn_out_b, {h}, p + "attention output bias", true));
    RETURN_IF_ERROR(CheckTensor(l.ffn_in_w, {inter, h}, p + "intermediate weight", true));
    RETURN_IF_ERROR(CheckTensor(l.ffn_in_b, {inter}, p + "intermediate bias", true));
    RETURN_IF_ERROR(CheckTensor(l.ffn_out_w, {h, inter}, p + "output weight", true));
    RETURN_IF_ERROR(CheckTensor(l.ffn_out_b, {h}, p + "output bias", true));
    RETURN_IF_ERROR(CheckTensor(l.attn_ln_gamma, {h}, p + "attention LayerNorm weight"));
    RETURN_IF_ERROR(CheckTensor(l.attn_ln_beta, {h}, p + "attention LayerNorm bias"));
    RETURN_IF_ERROR(CheckTensor(l.ffn_ln_gamma, {h}, p + "output LayerNorm weight"));
    RETURN_IF_ERROR(CheckTensor(l.ffn_ln_beta, {h}, p + "output LayerNorm bias"));
  }
  if (HeadUsesPooler(model)) {
    RETURN_IF_ERROR(CheckTensor(w.pooler_w, {h, h}, "pooler dense weight", true));
    RETURN_IF_ERROR(CheckTensor(w.pooler_b, {h}, "pooler dense bias", true));
  }
  if (c.head == HeadKind::kSequenceClassification || c.head == HeadKind::kTokenClassification ||
      c.head == HeadKind::kQuestionAnswering) {
    const int64_t labels = c.head == HeadKind::kQuestionAnswering ? 2 : c.num_labels;
    if (labels <= 0) return InvalidArgument("model: the classifier head needs num_labels > 0");
    RETURN_IF_ERROR(CheckTensor(w.classifier_w, {labels, h}, "classifier weight"));
    RETURN_IF_ERROR(CheckTensor(w.classifier_b, {labels}, "classifier bias"));
  }
  return Status::Ok();
}

}  // namespace bertrt

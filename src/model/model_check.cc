#include "model/model_check.h"

#include <cstdint>
#include <string>
#include <utility>
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

// How many of the `n` floating-point values stored as `Bits` are NaN or
// infinite (their exponent, `exponent_mask`, all ones), and the first one's
// index (n when none is).
template <typename Bits>
std::pair<size_t, size_t> NonFinite(const Bits* v, size_t n, Bits exponent_mask) {
  size_t count = 0, first = n;
  for (size_t i = 0; i < n; ++i)
    if ((v[i] & exponent_mask) == exponent_mask) {
      if (count++ == 0) first = i;
    }
  return {count, first};
}

}  // namespace

Status CheckFinite(const Tensor& t, const std::string& name) {
  if (t.empty()) return Status::Ok();
  const size_t n = static_cast<size_t>(t.numel());
  std::pair<size_t, size_t> bad;
  switch (t.dtype()) {
    case DType::kF32:
      bad = NonFinite(static_cast<const uint32_t*>(t.raw()), n, uint32_t{0x7f800000});
      break;
    case DType::kF16:
      bad = NonFinite(static_cast<const uint16_t*>(t.raw()), n, uint16_t{0x7c00});
      break;
    case DType::kBF16:
      bad = NonFinite(static_cast<const uint16_t*>(t.raw()), n, uint16_t{0x7f80});
      break;
    default:
      return Status::Ok();
  }
  if (bad.first == 0) return Status::Ok();
  return InvalidArgument(name + " holds " + std::to_string(bad.first) + " NaN or infinite " +
                         (bad.first == 1 ? "value" : "values") + " (the first at flat index " +
                         std::to_string(bad.second) +
                         "): a damaged file or a diverged training run; bertrt will not serve "
                         "it. Re-export the weights from a good checkpoint");
}

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
         (head == HeadKind::kBase && !model.weights.pooler_w.empty()) ||
         (model.config.prediction_head &&
          (head == HeadKind::kTokenClassification || head == HeadKind::kQuestionAnswering));
}

Status CheckModel(const Model& model) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  RETURN_IF_ERROR(CheckConfig(c, w.layers.size()));
  const int64_t h = c.hidden_size;
  RETURN_IF_ERROR(CheckTensor(w.word_embeddings, {c.vocab_size, h}, "word_embeddings", true));
  // Rotary models have no position table.
  if (c.rope_theta <= 0.0f || !w.position_embeddings.empty())
    RETURN_IF_ERROR(CheckTensor(w.position_embeddings, {c.max_position_embeddings, h},
                                "position_embeddings", true));
  if (c.pre_norm) {
    RETURN_IF_ERROR(CheckTensor(w.final_ln_gamma, {h}, "final LayerNorm weight"));
    RETURN_IF_ERROR(CheckTensor(w.final_ln_beta, {h}, "final LayerNorm bias"));
  }
  if (c.prediction_head && HeadUsesPooler(model)) {
    RETURN_IF_ERROR(CheckTensor(w.pooler_ln_gamma, {h}, "prediction head LayerNorm weight"));
    RETURN_IF_ERROR(CheckTensor(w.pooler_ln_beta, {h}, "prediction head LayerNorm bias"));
  }
  RETURN_IF_ERROR(CheckTensor(w.token_type_embeddings, {c.type_vocab_size, h},
                              "token_type_embeddings", true));
  if (c.relative_attention_buckets > 0)
    RETURN_IF_ERROR(CheckTensor(w.relative_attention_bias,
                                {c.relative_attention_buckets, c.num_heads},
                                "relative_attention_bias"));
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
    // A gated FFN's first linear gives both halves.
    const int64_t ffn_in = c.gated_ffn ? 2 * inter : inter;
    RETURN_IF_ERROR(CheckTensor(l.ffn_in_w, {ffn_in, h}, p + "intermediate weight", true));
    RETURN_IF_ERROR(CheckTensor(l.ffn_in_b, {ffn_in}, p + "intermediate bias", true));
    RETURN_IF_ERROR(CheckTensor(l.ffn_out_w, {h, inter}, p + "output weight", true));
    RETURN_IF_ERROR(CheckTensor(l.ffn_out_b, {h}, p + "output bias", true));
    // A pre-norm model's first layer reads the embeddings' LayerNorm instead.
    if (!(c.pre_norm && i == 0)) {
      RETURN_IF_ERROR(CheckTensor(l.attn_ln_gamma, {h}, p + "attention LayerNorm weight"));
      RETURN_IF_ERROR(CheckTensor(l.attn_ln_beta, {h}, p + "attention LayerNorm bias"));
    }
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
  if (c.head == HeadKind::kSparseEmbedding) {
    RETURN_IF_ERROR(CheckTensor(w.mlm_dense_w, {h, h}, "masked-LM transform weight", true));
    RETURN_IF_ERROR(CheckTensor(w.mlm_dense_b, {h}, "masked-LM transform bias", true));
    RETURN_IF_ERROR(CheckTensor(w.mlm_ln_gamma, {h}, "masked-LM LayerNorm weight"));
    RETURN_IF_ERROR(CheckTensor(w.mlm_ln_beta, {h}, "masked-LM LayerNorm bias"));
    RETURN_IF_ERROR(CheckTensor(w.mlm_decoder(), {c.vocab_size, h}, "masked-LM decoder weight",
                                true));
    RETURN_IF_ERROR(CheckTensor(w.mlm_decoder_b, {c.vocab_size}, "masked-LM decoder bias", true));
  }
  // Sentence-transformers' pooling, Dense modules and truncation.
  if (c.head == HeadKind::kSentenceEmbedding && c.pooling_modes.empty())
    return InvalidArgument("model: a sentence-embedding head needs a pooling mode");
  if (w.dense.size() != c.dense.size())
    return InvalidArgument("model: config has " + std::to_string(c.dense.size()) +
                           " Dense modules but the weights have " + std::to_string(w.dense.size()));
  int64_t width = c.pooled_width();
  for (size_t i = 0; i < c.dense.size(); ++i) {
    const DenseSpec& d = c.dense[i];
    const std::string p = "Dense module " + std::to_string(i) + " ";
    if (c.head != HeadKind::kSentenceEmbedding)
      return InvalidArgument("model: Dense modules need a sentence-embedding head");
    if (d.in_features != width)
      return InvalidArgument("model: " + p + "takes " + std::to_string(d.in_features) +
                             " values, the one before it gives " + std::to_string(width));
    RETURN_IF_ERROR(CheckTensor(w.dense[i].w, {d.out_features, d.in_features}, p + "weight"));
    if (d.bias) RETURN_IF_ERROR(CheckTensor(w.dense[i].b, {d.out_features}, p + "bias"));
    else if (!w.dense[i].b.empty())
      return InvalidArgument("model: " + p + "has a bias its config says it has not");
    width = d.out_features;
  }
  if (c.truncate_dim < 0 || c.truncate_dim > width)
    return InvalidArgument("model: truncate_dim " + std::to_string(c.truncate_dim) +
                           " is outside [0, " + std::to_string(width) + "]");
  return Status::Ok();
}

}  // namespace bertrt

#include "model/model_check.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/config_bounds.h"
#include "model/weight_schema.h"

namespace bertrt {
namespace {

Status CheckConfig(const ModelConfig& c, size_t num_layer_weights) {
  RETURN_IF_ERROR(model::CheckConfigBounds(c, "model"));
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

bool HasClassifier(HeadKind head) {
  return head == HeadKind::kSequenceClassification || head == HeadKind::kTokenClassification ||
         head == HeadKind::kQuestionAnswering;
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
  if (HasClassifier(c.head)) {
    const int64_t labels = c.head == HeadKind::kQuestionAnswering ? 2 : c.num_labels;
    if (labels <= 0) return InvalidArgument("model: the classifier head needs num_labels > 0");
  }
  if (w.dense.size() != c.dense.size())
    return InvalidArgument("model: config has " + std::to_string(c.dense.size()) +
                           " Dense modules but the weights have " + std::to_string(w.dense.size()));
  // Every tensor the forward reads, with its shape (model/weight_schema.h).
  RETURN_IF_ERROR(
      model::CheckWeights(w, model::ForwardWeightSchema(model), model.quantized.get()));
  // Sentence-transformers' pooling, Dense modules and truncation.
  if (c.head == HeadKind::kSentenceEmbedding && c.pooling_modes.empty())
    return InvalidArgument("model: a sentence-embedding head needs a pooling mode");
  int64_t width = c.pooled_width();
  for (size_t i = 0; i < c.dense.size(); ++i) {
    const DenseSpec& d = c.dense[i];
    const std::string p = "Dense module " + std::to_string(i) + " ";
    if (c.head != HeadKind::kSentenceEmbedding)
      return InvalidArgument("model: Dense modules need a sentence-embedding head");
    if (d.in_features != width)
      return InvalidArgument("model: " + p + "takes " + std::to_string(d.in_features) +
                             " values, the one before it gives " + std::to_string(width));
    if (!d.bias && !w.dense[i].b.empty())
      return InvalidArgument("model: " + p + "has a bias its config says it has not");
    width = d.out_features;
  }
  if (c.truncate_dim < 0 || c.truncate_dim > width)
    return InvalidArgument("model: truncate_dim " + std::to_string(c.truncate_dim) +
                           " is outside [0, " + std::to_string(width) + "]");
  return Status::Ok();
}

}  // namespace bertrt

#include "serving/embeddings.h"

#include <algorithm>
#include <cmath>

namespace bertrt::serving {

void L2Normalize(std::vector<float>& row) {
  double norm = 0;
  for (float v : row) norm += double(v) * v;
  norm = std::max(std::sqrt(norm), 1e-12);
  for (float& v : row) v = static_cast<float>(v / norm);
}

StatusOr<EmbeddingRequest> EmbeddingRequest::Make(const ModelConfig& config,
                                                  const OutputDescription& output,
                                                  EmbeddingOptions options) {
  // As TEI: a SPLADE vector is returned as it is, never normalized.
  if (output.sparse && options.normalize)
    return FailedPrecondition(
        "`normalize` is not available for SPLADE models: pass \"normalize\": false to /embed "
        "for the whole vocabulary-wide vector, or use /embed_sparse for its non-zero entries");
  if (options.dimensions && *options.dimensions > output.width)
    return InvalidArgument("`dimensions` should be smaller than the maximum embedding dimension (" +
                           std::to_string(output.width) + ")");
  EmbeddingRequest r;
  r.config_ = &config;
  r.output_ = &output;
  r.options_ = options;
  // TEI's normalize: false on a model with a Normalize module wants the
  // vector from before it: the engine runs without the module.
  r.before_normalize_ =
      !options.normalize && config.head == HeadKind::kSentenceEmbedding && config.normalize;
  return r;
}

StatusOr<std::vector<std::vector<float>>> EmbeddingRequest::Rows(const InferResult& r) const {
  const ModelConfig& c = *config_;
  const NamedOutput* out = r.outputs.Find(output_->name);
  if (!out) return Internal("the engine gave no " + output_->name);
  const int n = static_cast<int>(r.cu_seqlens.size()) - 1;
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < n; ++i)
    rows.emplace_back(out->data.begin() + size_t(i) * out->width,
                      out->data.begin() + size_t(i + 1) * out->width);
  // A vector the model's Normalize made a unit one stays as it is; one cut
  // (dimensions, or the model's truncate_dim after its Normalize) is
  // normalized again.
  const bool unit_already = c.head == HeadKind::kSentenceEmbedding && c.normalize &&
                            !before_normalize_ && output_->width == output_->array_width;
  for (auto& row : rows) {
    if (options_.dimensions && *options_.dimensions < static_cast<int>(row.size())) {
      row.resize(*options_.dimensions);
      if (options_.normalize) L2Normalize(row);
    } else if (options_.normalize && !unit_already) {
      L2Normalize(row);
    }
  }
  return rows;
}

}  // namespace bertrt::serving

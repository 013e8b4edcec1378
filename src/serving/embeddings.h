// Pooled embeddings as TEI's embed_pooled returns them, from what a run gave:
// the model's vector, or with normalize false its vector before the model's
// own Normalize module; the first `dimensions` values (Matryoshka); then
// L2-normalized unless normalize is false (and not again where the model's
// Normalize already made the vector a unit one). Knows no HTTP or JSON.
#pragma once

#include <optional>
#include <vector>

#include "bertrt/head_outputs.h"
#include "scheduler/scheduler.h"

namespace bertrt::serving {

struct EmbeddingOptions {
  bool normalize = true;
  std::optional<int> dimensions;  // nullopt: the full width
};

// What a request asks of the model's pooled `output` (its sequence vector),
// checked against the model and, once run, read from the run's result.
class EmbeddingRequest {
 public:
  // FailedPrecondition where the model cannot give it (a SPLADE vector
  // normalized), InvalidArgument for dimensions wider than the vector.
  static StatusOr<EmbeddingRequest> Make(const ModelConfig& config, const OutputDescription& output,
                                         EmbeddingOptions options);
  // The run must also return last_hidden_state (normalize false on a model
  // with a Normalize module: the vector before it is pooled from the states).
  bool needs_hidden_states() const { return before_normalize_; }
  // One row per sequence of `result`; pool_start: each sequence's
  // (RaggedBatch::pool_start). FailedPrecondition when the vector before
  // Normalize cannot be recomputed from the states (Dense modules,
  // truncate_dim).
  StatusOr<std::vector<std::vector<float>>> Rows(const InferResult& result,
                                                 const std::vector<int32_t>& pool_start) const;

 private:
  const ModelConfig* config_ = nullptr;
  const OutputDescription* output_ = nullptr;
  EmbeddingOptions options_;
  bool before_normalize_ = false;
};

// x / max(||x||, 1e-12), in double as the reference does.
void L2Normalize(std::vector<float>& row);

}  // namespace bertrt::serving

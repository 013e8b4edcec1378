// Pooled embeddings as TEI's embed_pooled returns them, from what a run gave:
// the model's vector, or with normalize false its vector before the model's
// own Normalize module (the engine leaves the module out:
// RunOptions::normalize); the first `dimensions` values (Matryoshka); then
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
  // How the engine runs it: without the model's Normalize module where the
  // request wants the vector before it (only then, so that the scheduler
  // keeps such requests apart only where it matters).
  RunOptions run_options() const { return {.normalize = !before_normalize_}; }
  // One row per sequence of `result`.
  StatusOr<std::vector<std::vector<float>>> Rows(const InferResult& result) const;

 private:
  const ModelConfig* config_ = nullptr;
  const OutputDescription* output_ = nullptr;
  EmbeddingOptions options_;
  bool before_normalize_ = false;
};

// x / max(||x||, 1e-12), in double as the reference does.
void L2Normalize(std::vector<float>& row);

}  // namespace bertrt::serving

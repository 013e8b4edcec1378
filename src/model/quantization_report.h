// The accuracy report of an 8-bit engine: its outputs on held-out inputs
// against fp32's, per output as the budget reads them (cosine for
// vectors, argmax agreement for predictions, retrieval agreement for
// embeddings).
#pragma once

#include <vector>

#include "bertrt/engine.h"
#include "bertrt/head_outputs.h"

namespace bertrt::model {

// Each described output's accuracy: `reference` and `quantized` hold the
// same held-out batches' outputs (BatchOutputs per batch, in order).
std::vector<OutputAccuracy> CompareOutputs(const std::vector<OutputDescription>& outputs,
                                           const std::vector<BatchOutputs>& reference,
                                           const std::vector<BatchOutputs>& quantized);

}  // namespace bertrt::model

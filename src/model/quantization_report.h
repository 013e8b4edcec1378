// The accuracy report of an 8-bit engine: its outputs on held-out inputs
// against fp32's, per output as the budget reads them (cosine for
// vectors, argmax agreement for predictions and answer spans, retrieval
// agreement for embeddings).
#pragma once

#include <vector>

#include "bertrt/engine.h"
#include "bertrt/head_outputs.h"

namespace bertrt::model {

// Each described output's accuracy over the rows ComparedRows gives:
// `reference` and `quantized` hold `batches`' outputs (BatchOutputs per
// batch, in order). Question answering's start and end logits are compared
// per sequence (where each puts the span's end), and an "answer span" entry
// says how often both agree.
std::vector<OutputAccuracy> CompareOutputs(const std::vector<OutputDescription>& outputs,
                                           const std::vector<RaggedBatch>& batches,
                                           const std::vector<BatchOutputs>& reference,
                                           const std::vector<BatchOutputs>& quantized);

}  // namespace bertrt::model

// A batch on its way to the device and its outputs on their way back: the
// ids, token types and sequence bounds laid out as the batch's shape runs it
// (batch_shape.h: dummy sequences for the padding, attention windows where
// they pay), staged in pinned memory and copied in one go; and outputs that
// come back in the device's order of sequences put back in the batch's.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/engine/activation_pool.h"
#include "backends/cuda/engine/batch_shape.h"
#include "bertrt/engine.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// Stages `batch` as `shape` into ws.host_ints and copies it to ws.ints on
// `stream`, with every token type 0 unless `token_types` (the model takes
// them: ModelConfig::takes_token_types). `windows`: attention takes packed
// windows at this shape
// (AttentionTakesWindows); the sequences are then reordered to fill them
// when some window holds more than one and there are more (sequence, head)
// units than multiprocessors (`heads` per sequence, `sm_count`). Returns
// that order (order[k]: the batch's index of the k-th sequence on the
// device), or nothing when the sequences keep the batch's order.
StatusOr<std::vector<int>> StageBatch(const RaggedBatch& batch, const Shape& shape,
                                      bool token_types, bool windows, int heads, int sm_count,
                                      const Workspace& ws, cudaStream_t stream);

// Output rows (`width` floats each; one per token when `per_token`, else one
// per sequence) in the device's order `order` back into the batch's, at `into`.
void RestoreBatchOrder(const std::vector<int>& order, const RaggedBatch& batch, bool per_token,
                       int width, const float* device_rows, float* into);

}  // namespace bertrt::cuda

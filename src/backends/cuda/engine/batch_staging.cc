#include "backends/cuda/engine/batch_staging.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/util/cuda_check.h"

namespace bertrt::cuda {

StatusOr<std::vector<int>> StageBatch(const RaggedBatch& batch, const Shape& shape,
                                      bool token_types, bool windows, int heads, int sm_count,
                                      const Workspace& ws, cudaStream_t stream) {
  const int t = batch.num_tokens(), n = batch.num_seqs();
  const BatchInts ints = LayOutInts(ws.host_ints, shape);
  const int32_t* cu = batch.cu_seqlens.data();
  // With as many units as multiprocessors or fewer, each unit has a
  // multiprocessor already, and windows would only make some units longer
  // (H200: 8 x 8..32 tokens 2.5% slower packed, 128 x 8..32 16% faster,
  // bench/RESULTS.md 2026-12-01).
  WindowPacking packing;
  std::vector<int> order;
  if (windows) {
    std::vector<int> lengths(n);
    for (int s = 0; s < n; ++s) lengths[s] = cu[s + 1] - cu[s];
    packing = PackWindows(lengths);
    if (packing.Packs() && static_cast<long>(n) * heads > sm_count)
      order = packing.order;
    else
      packing.window_seqs.assign(n, 1);  // a window per sequence, in the batch's order
  }
  if (order.empty()) {
    std::memcpy(ints.ids, batch.input_ids.data(), t * sizeof(int32_t));
    if (token_types) std::memcpy(ints.types, batch.token_type_ids.data(), t * sizeof(int32_t));
    std::memcpy(ints.cu, cu, (n + 1) * sizeof(int32_t));
    std::memcpy(ints.pool_start, batch.pool_start.data(), n * sizeof(int32_t));
  } else {
    ints.cu[0] = 0;
    for (int k = 0; k < n; ++k) {
      const int s = order[k], len = cu[s + 1] - cu[s];
      std::memcpy(ints.ids + ints.cu[k], batch.input_ids.data() + cu[s], len * sizeof(int32_t));
      if (token_types)
        std::memcpy(ints.types + ints.cu[k], batch.token_type_ids.data() + cu[s],
                    len * sizeof(int32_t));
      ints.cu[k + 1] = ints.cu[k] + len;
      ints.pool_start[k] = batch.pool_start[s];
    }
  }
  std::fill(ints.pool_start + n, ints.pool_start + shape.seqs, 0);
  // Dummy tokens: id 0 and type 0 exist in every vocabulary; their rows are
  // never read back.
  std::fill(ints.ids + t, ints.ids + shape.tokens, 0);
  std::fill(ints.types + (token_types ? t : 0), ints.types + shape.tokens, 0);
  LayOutDummies(shape, n, ints.cu);
  if (windows)
    LayOutWindows(ints.cu, shape.seqs, packing.window_seqs, ints.by_length, ints.row_bounds);
  else
    LongestFirst(ints.cu, shape.seqs, ints.by_length);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.ints, ws.host_ints, IntCount(shape) * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream));
  return order;
}

void RestoreBatchOrder(const std::vector<int>& order, const RaggedBatch& batch, bool per_token,
                       int width, const float* device_rows, float* into) {
  const int32_t* cu = batch.cu_seqlens.data();
  size_t device_row = 0;
  for (const int s : order) {
    const size_t count = per_token ? cu[s + 1] - cu[s] : 1;
    const size_t row = per_token ? cu[s] : s;
    std::copy_n(device_rows + device_row * width, count * width, into + row * width);
    device_row += count;
  }
}

}  // namespace bertrt::cuda

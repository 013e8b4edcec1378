// What every launcher of the CUDA engine's kernels takes (ops/layernorm.h,
// ops/elementwise.h, ops/heads.h, ops/attention.h; gemm/splitk_gemm.h):
// launchers are callable from plain C++. Activations are row-major
// [rows, width] in the engine's precision (`p`: float, half or bfloat16),
// sequences packed back to back and delimited by cu_seqlens; every reduction
// (LayerNorm statistics, softmax, dot products) runs in fp32. Each launcher
// reports a bad launch as a Status; errors inside a kernel surface at the next
// synchronizing call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace bertrt::cuda {

// Where a launcher enqueues its kernel: the engine's stream, and whether the
// kernel may launch while the stream's previous kernel is still finishing
// (programmatic dependent launch, sm_90 and newer; device_util.cuh's Launch).
// Always safe for the kernels here: each waits for the previous kernel's
// results before it touches memory.
struct Stream {
  cudaStream_t handle;
  bool overlap_launch;
};

// Weights (16-byte aligned) that a kernel pulls into L2 as it starts, for
// the GEMMs after it (device_util.cuh's PrefetchShare).
struct PrefetchRanges {
  static constexpr int kMax = 4;
  const void* ptr[kMax];
  size_t bytes[kMax];
  int count = 0;
  void Add(const void* p, size_t n) {
    if (p && n && count < kMax) ptr[count] = p, bytes[count++] = n;
  }
};

}  // namespace bertrt::cuda

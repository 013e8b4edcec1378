// Device-side helpers shared by the kernels: element conversions, reductions
// and the dispatch from Precision to an element type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "bertrt/cuda_engine.h"

namespace bertrt::cuda {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Sixteen bytes of T, so that one load or store moves a whole vector
// (LDG.128 / STG.128); the pointer must be 16-byte aligned.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the whole block, returned to every thread. `scratch` holds 32
// floats; blockDim.x is a multiple of 32.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

// Sequence of a packed token: the s with cu[s] <= t < cu[s + 1].
__device__ __forceinline__ int SequenceOf(const int32_t* cu, int num_seqs, int t) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (cu[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

}  // namespace bertrt::cuda

// Runs the statements with T the element type of `p`:
//   BERTRT_DISPATCH_PRECISION(p, Kernel<T><<<grid, block, 0, stream>>>(...));
#define BERTRT_DISPATCH_PRECISION(p, ...)                                      \
  switch (p) {                                                                  \
    case ::bertrt::Precision::kFp32: { using T = float; __VA_ARGS__; } break;   \
    case ::bertrt::Precision::kFp16: { using T = __half; __VA_ARGS__; } break;  \
    case ::bertrt::Precision::kBf16: { using T = __nv_bfloat16; __VA_ARGS__; } break; \
  }

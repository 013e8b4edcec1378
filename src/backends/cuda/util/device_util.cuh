// Helpers shared by the kernels and their launchers: element conversions,
// reductions, the dispatch from Precision to an element type, and the launch
// with programmatic dependent launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <utility>

#include "backends/cuda/gemm/epilogue.h"
#include "backends/cuda/ops/launch.h"
#include "bertrt/cuda_engine.h"

namespace bertrt::cuda {

// The first statement of every kernel here. Under programmatic dependent
// launch (Launch with Stream::overlap_launch, sm_90 and newer) a kernel's
// blocks may start while the stream's previous kernel is still running:
// griddepcontrol.wait holds them until that kernel has completed and its
// writes are visible, so they read and write nothing early. Then
// griddepcontrol.launch_dependents lets the next kernel's launch begin (it
// waits in turn). Without the attribute, or before sm_90, both are no-ops.
__device__ __forceinline__ void AfterPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Block `part` of `parts` starts copying its share of `r` into L2
// (cp.async.bulk.prefetch, sm_90 and newer): lane i of the calling warp takes
// pieces i, i + 32, ... of up to 64 KiB. A hint: it changes no data.
__device__ __forceinline__ void PrefetchShare(const PrefetchRanges& r, unsigned part,
                                              unsigned parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr size_t kPiece = 64 << 10;
  const unsigned lane = threadIdx.x & 31;
  // Unrolled, so that r stays in parameter space (an indexed loop copied
  // it to the stack of every kernel that calls this).
#pragma unroll
  for (int i = 0; i < PrefetchRanges::kMax; ++i) {
    if (i >= r.count) break;
    const size_t share = ((r.bytes[i] + parts - 1) / parts + 15) & ~size_t{15};
    const size_t begin = part * share;
    const size_t end = begin + share < r.bytes[i] ? begin + share : r.bytes[i];
    for (size_t off = begin + lane * kPiece; off < end; off += 32 * kPiece) {
      const size_t left = end - off;
      const unsigned size = static_cast<unsigned>((left < kPiece ? left : kPiece) & ~size_t{15});
      if (size > 0)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
                         static_cast<const char*>(r.ptr[i]) + off),
                     "r"(size)
                     : "memory");
    }
  }
#endif
}

// kernel<<<grid, block, smem, stream.handle>>>(args...), with programmatic
// stream serialization when stream.overlap_launch: the kernel's launch then
// overlaps the end of the previous kernel, and AfterPreviousKernel keeps the
// order of their memory accesses. A bad launch shows in cudaGetLastError, as
// with <<<>>>.
template <typename... Params, typename... Args>
void Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Stream stream,
            Args&&... args) {
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream.handle;
  config.attrs = &overlap;
  config.numAttrs = stream.overlap_launch ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

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

// A GEMM epilogue's activation, applied after bias (and residual).
template <Epilogue kEpilogue>
__device__ __forceinline__ float Activate(float v) {
  if constexpr (kEpilogue == Epilogue::kBiasGeluTanh)
    return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  else if constexpr (kEpilogue == Epilogue::kBiasRelu)
    return fmaxf(v, 0.0f);
  else if constexpr (kEpilogue == Epilogue::kBiasGelu)
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  else
    return v;
}

// Sixteen bytes of T, so that one load or store moves a whole vector
// (LDG.128 / STG.128); the pointer must be 16-byte aligned.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// Four elements of T (8 bytes for 16-bit types): a GEMM epilogue's vector.
template <typename T>
struct alignas(4 * sizeof(T)) Vec4 {
  T v[4];
};

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// kWarpOp (WarpSum, WarpMax) over the whole block, returned to every
// thread; `identity` is its neutral value. `scratch` holds 32 floats;
// blockDim.x is a multiple of 32.
template <float (*kWarpOp)(float)>
__device__ __forceinline__ float BlockReduce(float v, float identity, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = kWarpOp(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : identity;
  return kWarpOp(v);
}

__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  return BlockReduce<WarpSum>(v, 0.0f, scratch);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  return BlockReduce<WarpMax>(v, -INFINITY, scratch);
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

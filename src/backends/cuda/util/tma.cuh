// Hopper's tensor memory accelerator (TMA) and the shared-memory barriers its
// copies complete on (sm_90a): the pieces the warp-specialized kernels share
// (attention_tma.cuh; the stream-K GEMM probe, bench/probes/streamk_gemm.cuh).
// A producer thread announces a copy's bytes on a barrier and starts it;
// consumers wait for the barrier's phase and, when done with the data, arrive
// on a second barrier that lets the producer reuse the space.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>

#include "backends/cuda/util/cuda_check.h"

namespace bertrt::cuda {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void BarrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddress(bar)), "r"(count));
}
// Makes the block's barrier initializations visible to the copy engine;
// a block barrier must still follow before any thread uses them.
__device__ __forceinline__ void FenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddress(bar)) : "memory");
}
// Arrives and announces `bytes` of asynchronous copies that complete the phase.
__device__ __forceinline__ void BarrierArriveExpect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddress(bar)),
               "r"(bytes)
               : "memory");
}
// Until the phase of parity `parity` has completed. On a fresh barrier the
// phase of parity 1 counts as completed, so a producer's first wait on a
// slot's "empty" barrier (parity phase ^ 1 with phase 0) passes at once.
__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(SmemAddress(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
// The box of the tensor map at columns [x, ...) and rows [y, ...) into
// `dst`, completing on `bar`. Elements outside the tensor arrive as zeros
// and count towards the bytes the barrier expects.
__device__ __forceinline__ void TmaLoad(void* dst, const CUtensorMap* map, int x, int y,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(SmemAddress(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(SmemAddress(bar)), "r"(x), "r"(y)
      : "memory");
}
// `src` (shared memory, in the tensor map's box layout) to the box of the
// tensor map at columns [x, ...) and rows [y, ...), in this thread's bulk
// group (cp.async.bulk.commit_group / wait_group). Rows and columns outside
// the tensor are not written.
__device__ __forceinline__ void TmaStore(const CUtensorMap* map, const void* src, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(SmemAddress(src)), "r"(x), "r"(y)
      : "memory");
}
// Synchronizes the `threads` threads that use barrier `id` (not 0: that is
// __syncthreads's).
__device__ __forceinline__ void NamedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives on named barrier `id` without waiting for it.
__device__ __forceinline__ void NamedBarrierArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// cuTensorMapEncodeTiled, from the driver the runtime loaded (no link
// against libcuda).
inline StatusOr<PFN_cuTensorMapEncodeTiled_v12000> EncodeTiled() {
  static std::once_flag once;
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static cudaError_t error = cudaSuccess;
  std::call_once(once, [] {
    cudaDriverEntryPointQueryResult found{};
    void* p = nullptr;
    error = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                             &found);
    if (error == cudaSuccess && found == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  CUDA_RETURN_IF_ERROR(error);
  if (!fn) return Internal("TMA: the CUDA driver has no cuTensorMapEncodeTiled");
  return fn;
}

// A [rows, cols] row-major matrix of T (rows `ld` elements apart) read in
// boxes of box_rows x box_cols elements, swizzled as `swizzle` says (box_cols
// elements must then fill the swizzle's line: 128 or 64 bytes).
template <typename T>
StatusOr<CUtensorMap> TensorMap2D(const void* base, long rows, long cols, long ld, int box_rows,
                                  int box_cols, CUtensorMapSwizzle swizzle) {
  static_assert(sizeof(T) == 2, "16-bit elements");
  ASSIGN_OR_RETURN(auto encode, EncodeTiled());
  const CUtensorMapDataType type = std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * sizeof(T)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map{};
  const CUresult r = encode(&map, type, 2, const_cast<void*>(base), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Internal("TMA: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ") for a " +
                    std::to_string(rows) + " x " + std::to_string(cols) + " matrix");
  return map;
}

}  // namespace bertrt::cuda

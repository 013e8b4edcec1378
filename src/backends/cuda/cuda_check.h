// CUDA and cuBLASLt failures as Status: the engine never aborts on a GPU error.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "bertrt/status.h"

namespace bertrt::cuda {

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  const std::string msg = std::string("CUDA: ") + what + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return ResourceExhausted(msg);
  return Internal(msg);
}

inline Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  const std::string msg = std::string("cuBLASLt: ") + what + ": " + cublasLtGetStatusName(st) +
                          " (" + cublasLtGetStatusString(st) + ")";
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return ResourceExhausted(msg);
  return Internal(msg);
}

}  // namespace bertrt::cuda

// CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(...));
#define CUDA_RETURN_IF_ERROR(expr) RETURN_IF_ERROR(::bertrt::cuda::CudaStatus((expr), #expr))
#define CUBLAS_RETURN_IF_ERROR(expr) RETURN_IF_ERROR(::bertrt::cuda::CublasStatus((expr), #expr))
// After a kernel launch: a bad configuration shows up here, not at the launch.
#define CUDA_RETURN_IF_LAUNCH_FAILED(what) \
  RETURN_IF_ERROR(::bertrt::cuda::CudaStatus(cudaGetLastError(), what))

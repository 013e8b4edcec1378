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

// Named here rather than by cublasLtGetStatusName: the library is opened at
// run time (cublaslt_api.h), and it may be what failed to open.
inline const char* CublasStatusName(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

inline Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  const std::string msg = std::string("cuBLASLt: ") + what + ": " + CublasStatusName(st) + " (" +
                          std::to_string(static_cast<int>(st)) + ")";
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

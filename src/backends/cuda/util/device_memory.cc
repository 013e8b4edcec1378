#include "backends/cuda/util/device_memory.h"

#include <cuda_runtime.h>

#include <utility>

#include "backends/cuda/util/cuda_check.h"

namespace bertrt::cuda {
namespace {

std::string MiB(size_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Status DeviceBuffer::Allocate(size_t bytes, const std::string& what, const std::string& hint) {
  Release();
  if (bytes == 0) return Status::Ok();
  const cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err == cudaSuccess) {
    size_ = bytes;
    return Status::Ok();
  }
  ptr_ = nullptr;
  cudaGetLastError();
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  const std::string msg = "CUDA engine: could not allocate " + MiB(bytes) + " of GPU memory for " +
                          what + " (" + MiB(free_bytes) + " free of " + MiB(total_bytes) +
                          "): " + cudaGetErrorString(err) + "; " + hint;
  return err == cudaErrorMemoryAllocation ? ResourceExhausted(msg) : Internal(msg);
}

void DeviceBuffer::Release() {
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
  size_ = 0;
}

Status PinnedBuffer::Allocate(size_t bytes, const std::string& what) {
  Release();
  if (bytes == 0) return Status::Ok();
  const cudaError_t err = cudaMallocHost(&ptr_, bytes);
  if (err == cudaSuccess) {
    size_ = bytes;
    return Status::Ok();
  }
  ptr_ = nullptr;
  return CudaStatus(err, ("pinned host memory (" + MiB(bytes) + ") for " + what).c_str());
}

void PinnedBuffer::Release() {
  if (ptr_) cudaFreeHost(ptr_);
  ptr_ = nullptr;
  size_ = 0;
}

}  // namespace bertrt::cuda

#include <cuda_runtime.h>

#include "bertrt/devices.h"

namespace bertrt {

bool BuiltWithCuda() { return true; }

StatusOr<std::vector<GpuInfo>> ListGpus() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return FailedPrecondition(std::string("no usable NVIDIA GPU: ") + cudaGetErrorString(err) +
                              " (is the NVIDIA driver installed and a GPU visible?)");
  if (count == 0) return FailedPrecondition("no NVIDIA GPU is visible to this process");
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess)
      return Internal("cudaGetDeviceProperties(" + std::to_string(i) + "): " + cudaGetErrorString(err));
    gpus.push_back({i, prop.name, prop.major * 10 + prop.minor, prop.totalGlobalMem});
  }
  return gpus;
}

StatusOr<size_t> GpuMemoryInUse(int device) {
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err == cudaSuccess) err = cudaSetDevice(device);
  size_t free_bytes = 0, total_bytes = 0;
  if (err == cudaSuccess) err = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaSetDevice(previous);
  if (err != cudaSuccess)
    return FailedPrecondition("GPU " + std::to_string(device) + ": " + cudaGetErrorString(err));
  return total_bytes - free_bytes;
}

}  // namespace bertrt

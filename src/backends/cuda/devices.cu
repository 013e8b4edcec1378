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

}  // namespace bertrt

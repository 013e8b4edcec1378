#include <cuda_runtime.h>

#include "backends/cuda/gemm/cublaslt_api.h"
#include "bertrt/devices.h"
#include "core/startup_trace.h"

namespace bertrt {

bool BuiltWithCuda() { return true; }

namespace {

StatusOr<std::vector<GpuInfo>> ReadGpus() {
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

}  // namespace

StatusOr<std::vector<GpuInfo>> ListGpus() {
  // The GPUs a process sees are fixed when CUDA initializes, so they are read
  // once (the server's repository poll asks on every pass).
  static const StatusOr<std::vector<GpuInfo>> gpus = ReadGpus();
  return gpus;
}

GpuContextWarmup::GpuContextWarmup(std::vector<int> devices)
    : context_thread_([devices = std::move(devices)] {
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess) return;
        std::vector<int> wanted = devices;
        for (int i = 0; wanted.empty() && i < count; ++i) wanted.push_back(i);
        for (int d : wanted) {
          // cudaFree(nullptr) is the conventional way to make the runtime
          // create the current device's primary context.
          if (d >= 0 && d < count && cudaSetDevice(d) == cudaSuccess) cudaFree(nullptr);
        }
        TraceStartup("CUDA contexts created");
        // Waits for the library thread's dlopen.
        for (int d : wanted)
          if (d >= 0 && d < count && cudaSetDevice(d) == cudaSuccess) cuda::WarmUpCublasLt();
        TraceStartup("cuBLASLt's first heuristic query made");
      }),
      // An error here is the engine's to report, when it asks again.
      library_thread_([] {
        (void)cuda::CublasLt();
        TraceStartup("cuBLASLt opened");
      }) {}

GpuContextWarmup::~GpuContextWarmup() {
  if (context_thread_.joinable()) context_thread_.join();
  if (library_thread_.joinable()) library_thread_.join();
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

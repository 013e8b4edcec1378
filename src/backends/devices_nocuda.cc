// Used only when the build has no CUDA backend (see CMakeLists.txt).
#include "bertrt/devices.h"

namespace bertrt {

bool BuiltWithCuda() { return false; }

StatusOr<std::vector<GpuInfo>> ListGpus() {
  return FailedPrecondition(
      "this bertrt was built without the CUDA backend (nvcc was not found at build time); "
      "install the CUDA toolkit and rebuild, or use --device cpu");
}

StatusOr<size_t> GpuMemoryInUse(int) { return ListGpus().status(); }

GpuContextWarmup::GpuContextWarmup(std::vector<int>) {}
GpuContextWarmup::~GpuContextWarmup() = default;

}  // namespace bertrt

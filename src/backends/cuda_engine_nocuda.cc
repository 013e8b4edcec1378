// Used only when the build has no CUDA backend (see CMakeLists.txt).
#include "bertrt/cuda_engine.h"
#include "bertrt/devices.h"

namespace bertrt {

StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model>,
                                                   const CudaEngineOptions&) {
  // ListGpus() carries the explanation and what to do about it.
  return ListGpus().status();
}

StatusOr<std::vector<GemmChoice>> TimeGemms(const ModelConfig&, const CudaEngineOptions&, int,
                                            const std::function<void(int, int)>&) {
  return ListGpus().status();
}

}  // namespace bertrt

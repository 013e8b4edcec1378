#include "backends/cuda/gemm/bias_gelu_gemm.h"

namespace bertrt::cuda {

bool BiasGeluGemmApplies(Precision p, int kernel_compute_capability, int in, int out) {
  return BiasGeluGemmBuilt() && kernel_compute_capability == 90 &&
         (p == Precision::kFp16 || p == Precision::kBf16) && in % 8 == 0 && out % 8 == 0;
}

#ifndef BERTRT_HAVE_CUTLASS_SM90
// A build without sm_90a or without CUTLASS's headers (CMakeLists.txt).
bool BiasGeluGemmBuilt() { return false; }

Status BiasGeluGemm(Precision, const BiasGeluGemmArgs&, cudaStream_t) {
  return Unavailable("BiasGeluGemm: this build has no sm_90a CUTLASS kernels");
}
#endif

}  // namespace bertrt::cuda

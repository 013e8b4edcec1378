#include "backends/cuda/gemm/int8_gemm.h"

namespace bertrt::cuda {

bool Int8GemmApplies(Precision p, int kernel_compute_capability, int in, int out) {
  return Int8GemmBuilt() && kernel_compute_capability == 90 && p == Precision::kFp16 &&
         in % 16 == 0 && out % 16 == 0;
}

#ifndef BERTRT_HAVE_CUTLASS_SM90
// A build without sm_90a or without CUTLASS's headers (CMakeLists.txt).
bool Int8GemmBuilt() { return false; }

Status Int8Gemm(Precision, const Int8GemmArgs&, cudaStream_t) {
  return Unavailable("Int8Gemm: this build has no sm_90a CUTLASS kernels");
}
#endif

}  // namespace bertrt::cuda

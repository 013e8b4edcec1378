// The FFN's first GEMM with the exact GELU in its epilogue, for Hopper:
// y = gelu_erf(x W^T + bias), fp32 accumulation, one kernel.
//
// Why: cuBLASLt's only GELU epilogue is the tanh approximation, which is
// outside issue 24's bound on a trained model (all-MiniLM-L6-v2: 2.3x
// PyTorch's own fp16 error; exact GELU 0.78x). Run as cuBLASLt's bias GEMM
// and then a kernel of its own, the erf GELU reads and writes the whole
// intermediate once more (201 MB a layer for BERT-base at 128 x 128, ~50 us
// at HBM speed): 11% of the forward. This GEMM is built from CUTLASS's sm90
// collectives (TMA, warp-specialized wgmma, persistent tiles), whose epilogue
// applies the bias and the erf GELU before the tile leaves the multiprocessor.
// Built only where the build has sm_90a and CUTLASS's headers
// (scripts/fetch_cutlass.sh); the engine falls back to GEMM + kernel
// elsewhere.
#pragma once

#include <cuda_runtime.h>

#include "bertrt/cuda_engine.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

struct BiasGeluGemmArgs {
  const void* x;  // [rows, in], 16-byte aligned rows
  int rows, in;
  const void* w;     // [out, in], HF's layout
  const void* bias;  // [out]
  int out;
  void* y;  // [rows, out]; may not alias x
  int sm_count;
  // [rows, out], added before the activation: only for the kernels built
  // with a residual (sm90::BiasGeluGemmKernel's kResidual; the probes' for
  // now: bench/RESULTS.md, "CUTLASS for the other GEMMs"). BiasGeluGemm
  // takes none.
  const void* residual = nullptr;
};

// Whether this build holds the kernels (sm_90a code and CUTLASS's headers).
bool BiasGeluGemmBuilt();

// Whether the engine runs the FFN's first GEMM through BiasGeluGemm: built,
// code for sm_90 (the kernel's compute capability, not only the GPU's),
// fp16/bf16, `in` and `out` multiples of 8.
bool BiasGeluGemmApplies(Precision p, int kernel_compute_capability, int in, int out);

// y = gelu_erf(x W^T + bias) on `stream`; Unavailable where not built,
// InvalidArgument on a shape it cannot take.
Status BiasGeluGemm(Precision p, const BiasGeluGemmArgs& a, cudaStream_t stream);

}  // namespace bertrt::cuda

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

// The FP8 engine's FFN: its first GEMM, in FP8, with the bias, the erf GELU
// and the second FP8 GEMM's input quantization in the epilogue:
// y8 = E4M3(T(gelu_erf(T(scale x8 W8^T + bias))) / next_scale), T the
// engine's precision, one kernel. Otherwise (cuBLASLt's FP8 GEMM writing T,
// then one pass of ActivateToE4M3) the intermediate is written in 16 bits
// and read back: ~150 MB a layer at BERT-base b128, 16% of its fp8 forward
// (bench/RESULTS.md, 2026-12-05).
struct Fp8BiasGeluGemmArgs {
  const void* x8;  // [rows, in] E4M3, 16-byte aligned rows
  int rows, in;
  const void* w8;    // [out, in] E4M3, HF's layout
  float scale;       // x8's scale times w8's
  const void* bias;  // [out], T
  int out;
  float next_scale;  // the input scale of the FP8 GEMM that reads y8
  void* y8;          // [rows, out] E4M3; may not alias x8
  int sm_count;
};

// Whether the engine runs an FP8 Linear with the erf GELU whose output an
// FP8 Linear alone reads through Fp8BiasGeluGemm: built, code for sm_90,
// fp16/bf16, `in` and `out` multiples of 16.
bool Fp8BiasGeluGemmApplies(Precision p, int kernel_compute_capability, int in, int out);

// Unavailable where not built, InvalidArgument on a shape it cannot take.
Status Fp8BiasGeluGemm(Precision p, const Fp8BiasGeluGemmArgs& a, cudaStream_t stream);

}  // namespace bertrt::cuda

// The int8 engine's Linear on Hopper's integer tensor cores: the arithmetic
// of the CPU engine's int8 GEMM (cpu_linear.cc, Int8Gemm), so that a GPU
// answers what the plan's accuracy report measured.
//
// The input arrives as uint8 with a scale and a zero point per row
// (QuantizeRowsToUint8): per token, each row's own range onto 0..255; per
// tensor, the calibrated symmetric int8 value plus 128 (zero point 128),
// which gives the same integer products as the CPU's signed input. The
// weights are the plan's int8 [out, in] with a scale per output. One CUTLASS
// kernel (uint8 x int8, int32 accumulation, exact) whose epilogue takes the
// zero point's share out in integers (acc - zero[r] * weight_sum[o], exact),
// then y = T((that) * weight_scale[o] * row_scale[r] + bias[o] [+ residual])
// and, where asked, the erf GELU: no 32-bit product is written.
// Built only with sm_90a and CUTLASS's headers (bias_gelu_gemm.h's
// conditions); elsewhere the CUDA engine refuses int8 models.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "bertrt/cuda_engine.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

struct Int8GemmArgs {
  const uint8_t* x;  // [rows, in], 16-byte aligned rows
  const float* row_scales;       // [rows]
  const int32_t* row_zeros;      // [rows], 0..255
  int rows, in;
  const int8_t* w;               // [out, in], HF's layout
  const float* weight_scales;    // [out]
  const int32_t* weight_sums;    // [out]: the sum of each output's int8 weights
  const void* bias;              // [out], T; null: none
  int out;
  const void* residual = nullptr;  // [rows, out], T, added (not with gelu); not y
  bool gelu = false;               // the erf GELU after
  void* y;                         // [rows, out], T
  int sm_count;
};

// Whether this build holds the kernel (sm_90a code and CUTLASS's headers).
bool Int8GemmBuilt();

// Whether this build holds the kernel and it runs here: code for sm_90,
// fp16 (the int8 engine's other operations run in fp16), `in` and `out`
// multiples of 16.
bool Int8GemmApplies(Precision p, int kernel_compute_capability, int in, int out);

// Unavailable where not built; InvalidArgument on a shape it cannot take.
Status Int8Gemm(Precision p, const Int8GemmArgs& a, cudaStream_t stream);

}  // namespace bertrt::cuda

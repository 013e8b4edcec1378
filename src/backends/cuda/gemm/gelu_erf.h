// The erf GELU as the sm90 GEMM epilogue computes it (GeluErf in
// sm90/bias_gelu_gemm.cuh), written once for the device and for the host test
// that holds its accuracy (tests/unit/gelu_erf_test.cc): the host takes
// std::exp2 for ex2.approx (relative error 2^-22, far below the bound) and a
// NaN-keeping max for max.NaN.
//
// GELU(x) = x Phi(x) with one special-function instruction and no branch or
// clamp: for a = |x|, GELU(x) = max(x, 0) - a (1 - Phi(a)) on both sides of 0
// (x Phi(x) = x - x (1 - Phi(x)) for x >= 0, x (1 - Phi(-x)) below), and the
// tail 1 - Phi(a) is 2^p(a), p a degree-5 polynomial fitted to log2(1 -
// Phi(a)) for the least GELU error (scripts/fit_gelu_tail.py: weighted
// minimax over [0, 4], and falling past it, so that ex2 gives a tail of 0 for
// a large |x| with no clamp). |GELU error| <= 6.3e-7 against float64 for every
// finite float32 x: far below fp16's and bf16's rounding of the result. A
// NaN stays a NaN; +-inf give NaN (a = inf times a tail of 0), which only an
// input already infinite can reach: an fp32 sum of fp16 products cannot
// overflow.
//
// Why this form: the epilogue runs once per output element, and at
// BERT-large's size the H200 runs at its power cap, where each instruction per
// element costs clock speed across the whole forward (bench/RESULTS.md,
// 2026-12-03). Five fmas, ex2, max and one fma: seven of the FP32 pipe's
// instructions; the degree-7 polynomial with a clamp it replaces took ten,
// erff's two ranges and exp more.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define BERTRT_HOST_DEVICE __host__ __device__
#else
#define BERTRT_HOST_DEVICE
#endif

namespace bertrt::cuda {

// p(a) ~ log2(1 - Phi(a)) for a >= 0 (Horner, one fma a step).
BERTRT_HOST_DEVICE inline float GeluLog2Tail(float a) {
  float p = -0.000472718646f;
  p = fmaf(p, a, 0.00708163949f);
  p = fmaf(p, a, -0.0518240184f);
  p = fmaf(p, a, -0.459991008f);
  p = fmaf(p, a, -1.15079057f);
  return fmaf(p, a, -1.00003707f);
}

// GELU(x) = max(x, 0) - |x| 2^GeluLog2Tail(|x|). max.NaN keeps a NaN a NaN
// (fmaxf would turn it into 0).
BERTRT_HOST_DEVICE inline float ErfGelu(float x) {
  const float a = fabsf(x);
  float tail, relu;  // 1 - Phi(a) = 2^p; max(x, 0)
#if defined(__CUDA_ARCH__)
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(tail) : "f"(GeluLog2Tail(a)));
  asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(relu) : "f"(x));
#else
  tail = std::exp2(GeluLog2Tail(a));
  relu = std::isnan(x) ? x : std::fmax(x, 0.0f);
#endif
  return fmaf(-a, tail, relu);
}

}  // namespace bertrt::cuda

// What the GEMM probes (bias_gelu_gemm_probe.cu, power_cap_gemm_probe.cu)
// check their outputs with: an fp32 reference of y = gelu_erf(x W^T + bias)
// (or x W^T + bias + residual) on the first and last 64 rows.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "probe_util.h"

namespace probe {

// ref[r, o] = act(x[first + r] . w[o] + bias[o] [+ residual[first + r, o]])
// in fp32, act the erf GELU where `gelu`, else none.
__global__ void GemmReference(const __half* x, const __half* w, const __half* bias,
                              const __half* residual, bool gelu, int in, int out, int first,
                              float* ref) {
  const int r = blockIdx.y, o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= out) return;
  float acc = 0;
  for (int k = 0; k < in; ++k)
    acc += __half2float(x[size_t(first + r) * in + k]) * __half2float(w[size_t(o) * in + k]);
  acc += __half2float(bias[o]);
  if (residual) acc += __half2float(residual[size_t(first + r) * out + o]);
  ref[size_t(r) * out + o] = gelu ? 0.5f * acc * (1.0f + erff(acc * 0.70710678118654752f)) : acc;
}

// Largest |y - ref| over the first and last 64 rows, and largest |ref|.
inline std::pair<float, float> CheckGemm(const void* x, const void* w, const void* bias,
                                         const void* residual, bool gelu, const void* y, int rows,
                                         int in, int out) {
  const int block = std::min(64, rows);
  float* ref;
  CK(cudaMalloc(&ref, size_t(block) * out * 4));
  float err = 0, scale = 0;
  for (int first : {0, rows - block}) {
    GemmReference<<<dim3((out + 127) / 128, block), 128>>>(
        static_cast<const __half*>(x), static_cast<const __half*>(w),
        static_cast<const __half*>(bias), static_cast<const __half*>(residual), gelu, in, out,
        first, ref);
    std::vector<float> r(size_t(block) * out);
    std::vector<__half> got(r.size());
    CK(cudaMemcpy(r.data(), ref, r.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data(), static_cast<const __half*>(y) + size_t(first) * out, got.size() * 2,
                  cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < r.size(); ++i) {
      err = std::max(err, std::fabs(__half2float(got[i]) - r[i]));
      scale = std::max(scale, std::fabs(r[i]));
    }
  }
  cudaFree(ref);
  return {err, scale};
}
inline std::pair<float, float> CheckGeluGemm(const void* x, const void* w, const void* bias,
                                             const void* y, int rows, int in, int out) {
  return CheckGemm(x, w, bias, nullptr, true, y, rows, in, out);
}

}  // namespace probe

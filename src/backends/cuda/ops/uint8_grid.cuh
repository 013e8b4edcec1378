// The uint8 grid of the int8 GEMM's input rows (int8_gemm.h), in one place
// for the two kernels that write such rows: the quantization pass
// (elementwise.cu, QuantizeRowsToUint8) and the LayerNorm that makes its
// output's (layernorm.cu). Both then make the bytes the CPU engine's
// Int8Gemm makes of the same fp16 row.
#pragma once

#include <cstdint>

#include "backends/cuda/util/device_util.cuh"

namespace bertrt::cuda {

// Where a row's values v (x * mult: the smoothing divisor's and, per
// tensor, the input scale's reciprocals) go: nearbyint(v * inverse), plus
// the zero point. Per token the row's range over v and 0 goes onto 0..255
// (scale (hi - lo) / 255, zero point nearbyint(-lo / scale)); per tensor v
// rounds onto [-127, 127] and 128 is added (zero point 128, scale the
// input's). Rounding to nearest even, as the CPU's.
struct Uint8Grid {
  float scale = 1.0f, inverse = 1.0f, zero = 128.0f;
  bool per_token = false;

  __device__ __forceinline__ static Uint8Grid PerTensor(float input_scale) {
    return {input_scale, 1.0f, 128.0f, false};
  }
  // From each lane's lo <= 0 <= hi over its values: the warp's row.
  __device__ __forceinline__ static Uint8Grid PerTokenOfWarp(float lo, float hi) {
    lo = -WarpMax(-lo), hi = WarpMax(hi);
    Uint8Grid g;
    g.per_token = true;
    g.scale = hi > lo ? __fdiv_rn(hi - lo, 255.0f) : 1.0f;
    g.inverse = __fdiv_rn(1.0f, g.scale);
    g.zero = rintf(-lo * g.inverse);
    return g;
  }
  __device__ __forceinline__ uint8_t Code(float v) const {
    const float f = rintf(__fmul_rn(v, inverse));
    return static_cast<uint8_t>(per_token ? fminf(fmaxf(f + zero, 0.0f), 255.0f)
                                          : fminf(fmaxf(f, -127.0f), 127.0f) + 128.0f);
  }
};

// m = mult[col, col + n) (col and n multiples of 4, mult 16-byte aligned)
// in 16-byte loads: a lane's row vector takes 2 of them for its fp16
// elements where one load per element, its lanes 32 bytes apart, cost the
// quantization pass 4 times the L1 wavefronts (~100 us of FFN-out's input
// at BERT-base batch 128 on the H100, twice the pass's memory time).
template <int n>
__device__ __forceinline__ void LoadMultipliers(const float* mult, int col, float (&m)[n]) {
  static_assert(n % 4 == 0, "16-byte loads");
#pragma unroll
  for (int j = 0; j < n; j += 4)
    *reinterpret_cast<float4*>(m + j) = *reinterpret_cast<const float4*>(mult + col + j);
}

}  // namespace bertrt::cuda

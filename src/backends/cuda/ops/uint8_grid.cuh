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

// Writes the uint8 image of a row that a warp holds (Uint8Grid; per token
// where input_scale is 0): each lane's vectors y[0, count), vector i at
// columns (i * 32 + lane) * kSize onwards, times mult; the bytes to `bytes`
// (the row's), its scale and zero point to *scale and *zero.
template <typename T, int kVecs>
__device__ __forceinline__ void WriteUint8WarpRow(const Vec16<T> (&y)[kVecs], int count,
                                                  const float* mult, float input_scale,
                                                  uint8_t* bytes, float* scale, int32_t* zero) {
  constexpr int kSize = Vec16<T>::kSize;
  const int lane = threadIdx.x & 31;
  auto column = [&](int i) { return (i * 32 + lane) * kSize; };
  // v = y * mult of the lane's vector i.
  auto scaled = [&](int i, float (&v)[kSize]) {
    LoadMultipliers(mult, column(i), v);
#pragma unroll
    for (int j = 0; j < kSize; ++j) v[j] = __fmul_rn(ToFloat(y[i].v[j]), v[j]);
  };
  Uint8Grid grid = Uint8Grid::PerTensor(input_scale);
  if (input_scale == 0.0f) {
    float lo = 0.0f, hi = 0.0f;
#pragma unroll
    for (int i = 0; i < kVecs && i < count; ++i) {
      float v[kSize];
      scaled(i, v);
#pragma unroll
      for (int j = 0; j < kSize; ++j) lo = fminf(lo, v[j]), hi = fmaxf(hi, v[j]);
    }
    grid = Uint8Grid::PerTokenOfWarp(lo, hi);
  }
  struct alignas(kSize) Bytes {
    uint8_t b[kSize];
  };
#pragma unroll
  for (int i = 0; i < kVecs && i < count; ++i) {
    float v[kSize];
    scaled(i, v);
    Bytes q;
#pragma unroll
    for (int j = 0; j < kSize; ++j) q.b[j] = grid.Code(v[j]);
    *reinterpret_cast<Bytes*>(bytes + column(i)) = q;
  }
  if (lane == 0) *scale = grid.scale, *zero = static_cast<int32_t>(grid.zero);
}

}  // namespace bertrt::cuda

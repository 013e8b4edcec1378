// IEEE half and bfloat16 <-> fp32, bit-exact (subnormals, infinities and NaN
// payloads included), for the importer (widening checkpoints) and the plan
// builder and reader (narrowing and widening plan weights); and FP8 E4M3, the
// 8-bit float of Hopper's tensor cores (fp8 plans' weights and GEMM inputs).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bertrt/tensor.h"

namespace bertrt {

float HalfToFloat(uint16_t h);
float BFloat16ToFloat(uint16_t h);
// Round half to even; values past 65504 become infinity.
uint16_t FloatToHalf(float f);
uint16_t FloatToBFloat16(float f);

// FP8 E4M3 as NVIDIA's __nv_fp8_e4m3 and OCP's "E4M3FN": 1 sign, 4 exponent
// (bias 7) and 3 mantissa bits, subnormals down to 2^-9, no infinities, NaN
// the one code S.1111.111; the largest finite value is 448.
inline constexpr float kE4M3Max = 448.0f;
float E4M3ToFloat(uint8_t code);
// Round to nearest, ties to even, saturating: values beyond +-448 (and the
// infinities) become +-448, as the CUDA conversion with __NV_SATFINITE; NaN
// stays NaN.
uint8_t FloatToE4M3(float f);
// The value FloatToE4M3 rounds `f` to, as a float (E4M3ToFloat(FloatToE4M3(f))
// without the byte): what an FP8 GEMM reads of its input.
float RoundToE4M3(float f);

// `n` kF16 or kBF16 values at `src` (any alignment) into `dst`.
void WidenToFloat(DType dtype, const void* src, size_t n, float* dst);
// `n` floats into kF16 or kBF16 values.
void NarrowFromFloat(DType dtype, const float* src, size_t n, uint16_t* dst);

}  // namespace bertrt

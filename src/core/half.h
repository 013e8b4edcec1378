// IEEE half and bfloat16 <-> fp32, bit-exact (subnormals, infinities and NaN
// payloads included), for the importer (widening checkpoints) and the plan
// builder and reader (narrowing and widening plan weights).
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

// `n` kF16 or kBF16 values at `src` (any alignment) into `dst`.
void WidenToFloat(DType dtype, const void* src, size_t n, float* dst);
// `n` floats into kF16 or kBF16 values.
void NarrowFromFloat(DType dtype, const float* src, size_t n, uint16_t* dst);

}  // namespace bertrt

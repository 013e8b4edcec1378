#include "core/half.h"

#include <cmath>
#include <cstring>

namespace bertrt {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in fp32.
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    std::memcpy(&bits, &v, sizeof bits);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

float BFloat16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u)  // inf, or NaN kept quiet with its top payload bits
    return static_cast<uint16_t>(sign | (ax > 0x7F800000u ? 0x7E00u | ((ax >> 13) & 0x3FFu) : 0x7C00u));
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (ax < 0x38800000u) {
    // Half subnormals are multiples of 2^-24: scaling is exact and
    // nearbyint rounds half to even in the default rounding mode.
    float a;
    std::memcpy(&a, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  const uint32_t rounded = ax + 0xFFFu + ((ax >> 13) & 1u);  // round half to even
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

void WidenToFloat(DType dtype, const void* src, size_t n, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);  // the source gives no alignment guarantee
    dst[i] = dtype == DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
  }
}

void NarrowFromFloat(DType dtype, const float* src, size_t n, uint16_t* dst) {
  for (size_t i = 0; i < n; ++i)
    dst[i] = dtype == DType::kF16 ? FloatToHalf(src[i]) : FloatToBFloat16(src[i]);
}

}  // namespace bertrt

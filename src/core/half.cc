#include "core/half.h"

#include <cmath>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

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
    return static_cast<uint16_t>(sign |
                                 (ax > 0x7F800000u ? 0x7E00u | ((ax >> 13) & 0x3FFu) : 0x7C00u));
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

// Both directions run 8 values at a time with F16C (every x86-64-v3 CPU has
// it) for fp16, and as plain shifts the compiler vectorizes for bf16: a
// BERT-base plan holds 110M values, widened at load. The hardware quiets
// signalling NaNs, so any block holding an infinity or NaN takes the scalar
// path and stays bit-exact.
void WidenToFloat(DType dtype, const void* src, size_t n, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  size_t i = 0;
  if (dtype == DType::kF16) {
#if defined(__F16C__)
    const __m128i exp_mask = _mm_set1_epi16(0x7C00);
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 2 * i));
      const __m128i special = _mm_cmpeq_epi16(_mm_and_si128(h, exp_mask), exp_mask);
      if (!_mm_testz_si128(special, special)) {
        for (size_t k = i; k < i + 8; ++k) {
          uint16_t v;
          std::memcpy(&v, bytes + 2 * k, 2);
          dst[k] = HalfToFloat(v);
        }
        continue;
      }
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
#endif
  } else {
    for (; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, bytes + 2 * i, 2);  // the source gives no alignment guarantee
      const uint32_t b = static_cast<uint32_t>(v) << 16;
      std::memcpy(dst + i, &b, 4);
    }
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    dst[i] = dtype == DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
  }
}

void NarrowFromFloat(DType dtype, const float* src, size_t n, uint16_t* dst) {
  size_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  if (dtype == DType::kF16) {
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(src + i);
      if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {  // a NaN
        for (size_t k = i; k < i + 8; ++k) dst[k] = FloatToHalf(src[k]);
        continue;
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
#endif
  for (; i < n; ++i) dst[i] = dtype == DType::kF16 ? FloatToHalf(src[i]) : FloatToBFloat16(src[i]);
}

float E4M3ToFloat(uint8_t code) {
  const float sign = (code & 0x80u) ? -1.0f : 1.0f;
  const int exp = (code >> 3) & 0xf, mant = code & 0x7;
  if (exp == 0xf && mant == 0x7) return std::nanf("");
  // Subnormals are mant/8 * 2^-6; normals (1 + mant/8) * 2^(exp - 7).
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 10);
}

float RoundToE4M3(float f) {
  if (std::isnan(f)) return f;
  const float a = std::fabs(f);
  float r;
  if (a < 0x1p-6f) {
    // Subnormal range: multiples of 2^-9. Adding 2^14 (whose float ulp is
    // 2^-9) rounds to one, ties to even, in the default rounding mode.
    r = (a + 0x1p14f) - 0x1p14f;  // (no -ffast-math here to fold it away)
  } else if (a >= kE4M3Max) {
    r = kE4M3Max;
  } else {
    // Keep 3 of fp32's 23 mantissa bits, rounding the 20 dropped ones to
    // nearest even (a carry moves into the exponent, as it should).
    uint32_t bits;
    std::memcpy(&bits, &a, sizeof bits);
    bits += 0x7ffffu + ((bits >> 20) & 1u);
    bits &= 0xfff00000u;
    std::memcpy(&r, &bits, sizeof r);
    r = std::fmin(r, kE4M3Max);  // 464 and up round past 448: saturate
  }
  return std::copysign(r, f);
}

uint8_t FloatToE4M3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80u : 0u;
  if (std::isnan(f)) return sign | 0x7fu;
  const float r = std::fabs(RoundToE4M3(f));
  if (r < 0x1p-6f) return sign | static_cast<uint8_t>(r * 512.0f);  // subnormal: mant = r / 2^-9
  uint32_t bits;
  std::memcpy(&bits, &r, sizeof bits);
  const int exp = static_cast<int>(bits >> 23) - 127 + 7;
  return sign | static_cast<uint8_t>(exp << 3) | static_cast<uint8_t>((bits >> 20) & 0x7u);
}

}  // namespace bertrt

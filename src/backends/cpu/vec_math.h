// AVX2 versions of the transcendental functions the encoder needs. They are
// accurate to a few fp32 ulps (absolute error below 3e-7 for erf), far inside
// the 1e-4 parity budget, and, unlike std::erf/std::exp in a loop, fast enough
// that GELU and softmax stay a small fraction of a GEMM. Every lane is computed
// the same way whatever its position, so results never depend on batch layout.
#pragma once

#include <immintrin.h>

#include <cmath>

namespace bertrt::cpu {

// e^x; inputs below -87.3 give ~0, above 88.3 are clamped.
inline __m256 Exp8(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.3f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  // x = n ln2 + r, |r| <= ln2/2, with ln2 split in two for an exact n ln2.
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // Minimax polynomial for (e^r - 1 - r) / r^2.
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// erf via Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
inline __m256 Erf8(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 sign = _mm256_and_ps(x, sign_mask);
  __m256 a = _mm256_andnot_ps(sign_mask, x);
  __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f),
                           _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f)));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  p = _mm256_mul_ps(p, t);
  __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
  __m256 y = _mm256_fnmadd_ps(p, e, _mm256_set1_ps(1.0f));
  return _mm256_or_ps(y, sign);
}

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), the
// exponential form elsewhere.
inline __m256 Tanh8(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 sign = _mm256_and_ps(x, sign_mask);
  __m256 a = _mm256_andnot_ps(sign_mask, x);
  __m256 z = _mm256_mul_ps(a, a);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), a, a);
  __m256 e = Exp8(_mm256_add_ps(a, a));
  __m256 large = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                               _mm256_div_ps(_mm256_set1_ps(2.0f),
                                             _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
  __m256 y = _mm256_blendv_ps(large, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
  return _mm256_or_ps(y, sign);
}

// x[i] = f(x[i], b[i]) for i in [0, n), 8 lanes at a time (b may be null:
// zeros). The tail goes through padded copies so every element sees exactly
// the same arithmetic wherever it sits.
template <typename F>
inline void Map8(float* x, const float* b, int n, F f) {
  int i = 0;
  const __m256 zero = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, f(_mm256_loadu_ps(x + i), b ? _mm256_loadu_ps(b + i) : zero));
  if (i < n) {
    alignas(32) float xt[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    alignas(32) float bt[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < n - i; ++k) {
      xt[k] = x[i + k];
      bt[k] = b ? b[i + k] : 0.0f;
    }
    _mm256_store_ps(xt, f(_mm256_load_ps(xt), _mm256_load_ps(bt)));
    for (int k = 0; k < n - i; ++k) x[i + k] = xt[k];
  }
}

}  // namespace bertrt::cpu

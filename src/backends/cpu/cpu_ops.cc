#include "backends/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu/vec_math.h"

namespace bertrt::cpu {

StatusOr<PackedLinear> PackLinear(const std::vector<const Tensor*>& weights,
                                  const std::vector<const Tensor*>& biases, int in,
                                  const char* name) {
  PackedLinear p;
  p.in = in;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = *weights[i];
    const Tensor& b = *biases[i];
    if (w.empty() || b.empty() || w.dtype() != DType::kF32 || b.dtype() != DType::kF32 ||
        w.rank() != 2 || w.dim(1) != in || b.rank() != 1 || b.dim(0) != w.dim(0))
      return InvalidArgument(std::string("cpu engine: ") + name + " weight " +
                             ShapeToString(w.shape()) + " / bias " + ShapeToString(b.shape()) +
                             " do not match the input width " + std::to_string(in) +
                             " (fp32 [out, in] and [out] expected)");
    p.out += static_cast<int>(w.dim(0));
  }
  if (weights.size() == 1) {
    p.w = weights[0]->f32();
    p.b = biases[0]->f32();
    return p;
  }
  const size_t wsize = static_cast<size_t>(p.out) * in;
  p.owned.resize(wsize + p.out);
  size_t wo = 0, bo = wsize;
  for (size_t i = 0; i < weights.size(); ++i) {
    std::memcpy(p.owned.data() + wo, weights[i]->f32(), weights[i]->nbytes());
    std::memcpy(p.owned.data() + bo, biases[i]->f32(), biases[i]->nbytes());
    wo += weights[i]->numel();
    bo += biases[i]->numel();
  }
  p.w = p.owned.data();
  p.b = p.owned.data() + wsize;
  return p;
}

namespace {

inline __m256 ApplyAct(__m256 x, Act act) {
  switch (act) {
    case Act::kNone: return x;
    case Act::kRelu: return _mm256_max_ps(x, _mm256_setzero_ps());
    case Act::kTanh: return Tanh8(x);
    case Act::kGelu: {
      __m256 e = Erf8(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
      return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)),
                           _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
    }
    case Act::kGeluTanh: {
      __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
      __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286536f),
                                   _mm256_fmadd_ps(x3, _mm256_set1_ps(0.044715f), x));
      return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)),
                           _mm256_add_ps(Tanh8(inner), _mm256_set1_ps(1.0f)));
    }
  }
  return x;
}

// Row LayerNorm in place; x already holds everything that is summed in.
void LayerNormRow(float* x, int n, const float* gamma, const float* beta, float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const float inv = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] = (x[i] - mean) * inv * gamma[i] + beta[i];
}

}  // namespace

void BiasAct(float* x, int m, int n, const float* bias, Act act, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < m; ++r)
    Map8(x + static_cast<size_t>(r) * n, bias, n,
         [act](__m256 v, __m256 b) { return ApplyAct(_mm256_add_ps(v, b), act); });
}

void BiasLayerNorm(float* x, int m, int n, const float* bias, const float* gamma,
                   const float* beta, float eps, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < m; ++r) {
    float* row = x + static_cast<size_t>(r) * n;
    if (bias) {
#pragma omp simd
      for (int i = 0; i < n; ++i) row[i] += bias[i];
    }
    LayerNormRow(row, n, gamma, beta, eps);
  }
}

void EmbedLayerNorm(const int32_t* ids, const int32_t* types, const int32_t* cu_seqlens,
                    int num_seqs, const EmbeddingTables& tables, int h, float eps, float* out,
                    int threads) {
  const int tokens = cu_seqlens[num_seqs];
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < tokens; ++t) {
    int seq = static_cast<int>(std::upper_bound(cu_seqlens, cu_seqlens + num_seqs + 1, t) -
                               cu_seqlens) - 1;
    const float* w = tables.word + static_cast<size_t>(ids[t]) * h;
    const float* p = tables.position + static_cast<size_t>(t - cu_seqlens[seq]) * h;
    const float* ty = tables.type + static_cast<size_t>(types[t]) * h;
    float* row = out + static_cast<size_t>(t) * h;
#pragma omp simd
    for (int i = 0; i < h; ++i) row[i] = w[i] + p[i] + ty[i];
    LayerNormRow(row, h, tables.gamma, tables.beta, eps);
  }
}

void GatherFirstTokens(const float* x, const int32_t* cu_seqlens, int num_seqs, int h,
                       float* out) {
  // memmove: out may be x (row s then comes from row cu_seqlens[s] >= s,
  // which no earlier row overwrote).
  for (int s = 0; s < num_seqs; ++s)
    std::memmove(out + static_cast<size_t>(s) * h, x + static_cast<size_t>(cu_seqlens[s]) * h,
                 sizeof(float) * h);
}

void PoolSequences(const float* x, const int32_t* cu_seqlens, int num_seqs, int h,
                   Pooling pooling, float* out) {
  if (pooling == Pooling::kCls) return GatherFirstTokens(x, cu_seqlens, num_seqs, h, out);
  for (int s = 0; s < num_seqs; ++s) {
    float* o = out + static_cast<size_t>(s) * h;
    const int begin = cu_seqlens[s], end = cu_seqlens[s + 1];
    std::memcpy(o, x + static_cast<size_t>(begin) * h, sizeof(float) * h);
    for (int t = begin + 1; t < end; ++t) {
      const float* row = x + static_cast<size_t>(t) * h;
      if (pooling == Pooling::kMax) {
        for (int i = 0; i < h; ++i) o[i] = std::max(o[i], row[i]);
      } else {
        for (int i = 0; i < h; ++i) o[i] += row[i];
      }
    }
    if (pooling == Pooling::kMean) {
      const float len = static_cast<float>(end - begin);
      for (int i = 0; i < h; ++i) o[i] /= len;
    }
  }
}

void L2NormalizeRows(float* x, int m, int n) {
  for (int r = 0; r < m; ++r) {
    float* row = x + static_cast<size_t>(r) * n;
    double sq = 0.0;
    for (int i = 0; i < n; ++i) sq += static_cast<double>(row[i]) * row[i];
    const float norm = static_cast<float>(std::max(std::sqrt(sq), 1e-12));
    for (int i = 0; i < n; ++i) row[i] /= norm;
  }
}

}  // namespace bertrt::cpu

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
    case Act::kSigmoid: {  // 1 / (1 + e^-x) = (1 + tanh(x / 2)) / 2
      const __m256 half = _mm256_set1_ps(0.5f);
      return _mm256_fmadd_ps(Tanh8(_mm256_mul_ps(x, half)), half, half);
    }
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

// out = LayerNorm(in) of one row; in may be out.
void LayerNormRow(const float* in, float* out, int n, const float* gamma, const float* beta,
                  float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += in[i];
  const float mean = sum / static_cast<float>(n);
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int i = 0; i < n; ++i) sq += (in[i] - mean) * (in[i] - mean);
  const float inv = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
#pragma omp simd
  for (int i = 0; i < n; ++i) out[i] = (in[i] - mean) * inv * gamma[i] + beta[i];
}

}  // namespace

void BiasAct(float* x, int m, int n, const float* bias, Act act, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < m; ++r) BiasActRow(x + static_cast<size_t>(r) * n, n, bias, act);
}

void BiasActRow(float* x, int n, const float* bias, Act act) {
  Map8(x, bias, n, [act](__m256 v, __m256 b) { return ApplyAct(_mm256_add_ps(v, b), act); });
}

void LayerNorm(const float* in, float* out, int m, int n, const float* gamma, const float* beta,
               float eps, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < m; ++r)
    LayerNormRow(in + static_cast<size_t>(r) * n, out + static_cast<size_t>(r) * n, n, gamma, beta,
                 eps);
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
    const float* ty = tables.type + (types ? static_cast<size_t>(types[t]) * h : 0);
    float* row = out + static_cast<size_t>(t) * h;
    if (tables.position) {
      const float* p = tables.position + static_cast<size_t>(t - cu_seqlens[seq]) * h;
#pragma omp simd
      for (int i = 0; i < h; ++i) row[i] = w[i] + p[i] + ty[i];
    } else {  // rotary positions, applied in attention
#pragma omp simd
      for (int i = 0; i < h; ++i) row[i] = w[i] + ty[i];
    }
    LayerNormRow(row, row, h, tables.gamma, tables.beta, eps);
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

void PoolSequences(const float* x, const int32_t* cu_seqlens, const int32_t* pool_start,
                   int num_seqs, int h, Pooling pooling, float* out, int out_stride) {
  auto row = [&](int t) { return x + static_cast<size_t>(t) * h; };
  for (int s = 0; s < num_seqs; ++s) {
    float* o = out + static_cast<size_t>(s) * out_stride;
    // sentence-transformers leaves a prompt out by masking its tokens: cls
    // then takes the first token not masked, the position weights of
    // weightedmean still count from the sequence's first token.
    const int first = cu_seqlens[s], skip = pool_start ? pool_start[s] : 0;
    const int begin = first + skip, end = cu_seqlens[s + 1], len = end - begin;
    switch (pooling) {
      case Pooling::kCls:
        std::memcpy(o, row(begin), sizeof(float) * h);
        break;
      case Pooling::kLastToken:
        std::memcpy(o, row(end - 1), sizeof(float) * h);
        break;
      case Pooling::kMax:
        std::memcpy(o, row(begin), sizeof(float) * h);
        for (int t = begin + 1; t < end; ++t)
          for (int i = 0; i < h; ++i) o[i] = std::max(o[i], row(t)[i]);
        break;
      case Pooling::kMean:
      case Pooling::kMeanSqrtLen:
      case Pooling::kWeightedMean: {
        // Position weights 1, 2, ... for weightedmean; 1 for the others.
        const bool weighted = pooling == Pooling::kWeightedMean;
        std::fill(o, o + h, 0.0f);
        for (int t = begin; t < end; ++t) {
          const float w = weighted ? static_cast<float>(t - first + 1) : 1.0f;
          for (int i = 0; i < h; ++i) o[i] += w * row(t)[i];
        }
        // weightedmean: the sum of the weights skip + 1 .. skip + len.
        const double div = pooling == Pooling::kMean        ? len
                           : pooling == Pooling::kMeanSqrtLen ? std::sqrt(double(len))
                                                              : 0.5 * len * (len + 1 + 2.0 * skip);
        for (int i = 0; i < h; ++i) o[i] = static_cast<float>(o[i] / div);
        break;
      }
    }
  }
}

void ApplyRotary(float* qkv, const int32_t* cu_seqlens, int num_seqs, int h, int heads,
                 const float* table, int threads) {
  const int d = h / heads, half = d / 2;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int s = 0; s < num_seqs; ++s) {
    for (int t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) {
      const float* angles = table + static_cast<size_t>(t - cu_seqlens[s]) * half * 2;
      float* row = qkv + static_cast<size_t>(t) * 3 * h;
      for (int i = 0; i < half; ++i) {
        const float c = angles[2 * i], sn = angles[2 * i + 1];
        for (int part = 0; part < 2; ++part) {  // Q, then K
          for (int head = 0; head < heads; ++head) {
            float* x = row + part * h + head * d;
            const float a = x[i], b = x[i + half];
            x[i] = a * c - b * sn;
            x[i + half] = b * c + a * sn;
          }
        }
      }
    }
  }
}

void GatedGelu(const float* in, int rows, int inter, bool tanh_form, float* out, int threads) {
  const Act act = tanh_form ? Act::kGeluTanh : Act::kGelu;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* row = in + static_cast<size_t>(r) * 2 * inter;
    float* o = out + static_cast<size_t>(r) * inter;
    std::memcpy(o, row, sizeof(float) * inter);
    Map8(o, row + inter, inter,
         [act](__m256 v, __m256 gate) { return _mm256_mul_ps(ApplyAct(v, act), gate); });
  }
}

void SpladePool(const float* logits, int first_token, int rows, const int32_t* cu_seqlens,
                int num_seqs, int vocab, bool sum, bool log1p_twice, float* out, int threads) {
  if (rows <= 0) return;
  // The sequence of the first token: the last s with cu_seqlens[s] <= first_token.
  const int first_seq =
      static_cast<int>(std::upper_bound(cu_seqlens, cu_seqlens + num_seqs + 1, first_token) -
                       cu_seqlens) - 1;
  constexpr int kColumns = 256;  // a block of vocabulary columns per task
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int v0 = 0; v0 < vocab; v0 += kColumns) {
    const int v1 = std::min(vocab, v0 + kColumns);
    int s = first_seq;
    for (int r = 0; r < rows; ++r) {
      while (first_token + r >= cu_seqlens[s + 1]) ++s;
      const float* l = logits + static_cast<size_t>(r) * vocab;
      float* o = out + static_cast<size_t>(s) * vocab;
      for (int v = v0; v < v1; ++v) {
        float f = std::log1p(std::max(l[v], 0.0f));
        if (log1p_twice) f = std::log1p(f);
        o[v] = sum ? o[v] + f : std::max(o[v], f);
      }
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

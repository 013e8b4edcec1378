// Float64 references of the encoder's ops, written plainly from their
// definitions (and transformers' / sentence-transformers' where they define
// them), for the op tests of every backend: random inputs, a normwise error.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "bertrt/model.h"

namespace bertrt::test {

inline std::vector<float> Random(size_t n, std::mt19937* rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(*rng);
  return v;
}

// max |got - want| / max |want|: a normwise error that does not blow up on
// entries that happen to be near zero.
inline double NormRelErr(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0.0, scale = 1e-30;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

inline double RefGelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
inline double RefGeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

inline double RefHidden(double x, HiddenAct act) {
  switch (act) {
    case HiddenAct::kGelu:
      return RefGelu(x);
    case HiddenAct::kGeluTanh:
      return RefGeluTanh(x);
    case HiddenAct::kRelu:
      return std::max(x, 0.0);
  }
  return x;
}

inline double RefDense(double x, DenseActivation act) {
  switch (act) {
    case DenseActivation::kIdentity:
      return x;
    case DenseActivation::kTanh:
      return std::tanh(x);
    case DenseActivation::kRelu:
      return std::max(x, 0.0);
    case DenseActivation::kGelu:
      return RefGelu(x);
    case DenseActivation::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
  }
  return x;
}

inline void RefLayerNorm(double* row, int n, const float* gamma, const float* beta, double eps) {
  double mean = 0.0, var = 0.0;
  for (int i = 0; i < n; ++i) mean += row[i];
  mean /= n;
  for (int i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
  var /= n;
  for (int i = 0; i < n; ++i) row[i] = (row[i] - mean) / std::sqrt(var + eps) * gamma[i] + beta[i];
}

// y[r] = x[r] W^T + b for W [out, in].
inline std::vector<double> RefLinear(const std::vector<float>& x, int rows, int in,
                                     const std::vector<float>& w, const std::vector<float>& b,
                                     int out) {
  std::vector<double> y(size_t(rows) * out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int k = 0; k < in; ++k) s += double{x[size_t(r) * in + k]} * w[size_t(o) * in + k];
      y[size_t(r) * out + o] = s;
    }
  return y;
}

// Attention of qkv [tokens, 3h] (Q | K | V, heads contiguous in each) per
// sequence and head. `bias`: [heads][2 * span - 1] added to each score by key
// minus query distance (empty: none); `window` > 0: only keys within that
// many positions of the query.
inline std::vector<double> RefAttention(const std::vector<float>& qkv,
                                        const std::vector<int32_t>& cu, int h, int heads,
                                        const std::vector<float>& bias = {}, int span = 0,
                                        int window = 0) {
  const int d = h / heads, tokens = cu.back();
  std::vector<double> ctx(size_t(tokens) * h, 0.0);
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int hd = 0; hd < heads; ++hd)
      for (int i = cu[s]; i < cu[s + 1]; ++i) {
        std::vector<double> p;
        for (int j = cu[s]; j < cu[s + 1]; ++j) {
          double dot = 0.0;
          for (int e = 0; e < d; ++e)
            dot += double{qkv[i * 3 * h + hd * d + e]} * qkv[j * 3 * h + h + hd * d + e];
          const double b =
              bias.empty() ? 0.0 : bias[size_t(hd) * (2 * span - 1) + (j - i) + span - 1];
          // Outside the window: masked, as -inf would.
          const bool seen = window == 0 || std::abs(j - i) <= window;
          p.push_back(seen ? dot / std::sqrt(double(d)) + b : -1e300);
        }
        double mx = *std::max_element(p.begin(), p.end()), sum = 0.0;
        for (double& v : p) sum += (v = std::exp(v - mx));
        for (int j = cu[s]; j < cu[s + 1]; ++j)
          for (int e = 0; e < d; ++e)
            ctx[i * h + hd * d + e] += p[j - cu[s]] / sum * qkv[j * 3 * h + 2 * h + hd * d + e];
      }
  return ctx;
}

// Rotary positions (transformers' rotate_half: the pair (x[i], x[i + d/2]))
// on Q and K of qkv [tokens, 3h], positions counted from each sequence's start.
inline std::vector<double> RefRotary(const std::vector<float>& qkv, const std::vector<int32_t>& cu,
                                     int h, int heads, double theta) {
  const int d = h / heads;
  std::vector<double> out(qkv.begin(), qkv.end());
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int t = cu[s]; t < cu[s + 1]; ++t)
      for (int part = 0; part < 2; ++part)
        for (int hd = 0; hd < heads; ++hd)
          for (int i = 0; i < d / 2; ++i) {
            const double angle = (t - cu[s]) * std::pow(theta, -2.0 * i / d);
            const size_t at = size_t(t) * 3 * h + part * h + hd * d;
            const double a = qkv[at + i], b = qkv[at + i + d / 2];
            out[at + i] = a * std::cos(angle) - b * std::sin(angle);
            out[at + i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
          }
  return out;
}

// Sentence-transformers' pooling of each sequence's rows of x [tokens, h]
// from its token pool_start[s] on (empty: 0): the tokens before it masked,
// the weighted mean's weights still counting from 1 at the sequence's start.
inline std::vector<double> RefPool(const std::vector<float>& x, const std::vector<int32_t>& cu,
                                   const std::vector<int32_t>& pool_start, int h, Pooling pooling) {
  const int seqs = static_cast<int>(cu.size()) - 1;
  std::vector<double> out(size_t(seqs) * h);
  for (int s = 0; s < seqs; ++s) {
    const int first = cu[s] + (pool_start.empty() ? 0 : pool_start[s]);
    for (int i = 0; i < h; ++i) {
      double acc = pooling == Pooling::kMax ? -1e30 : 0.0, weights = 0.0, kept = 0.0;
      for (int t = cu[s]; t < cu[s + 1]; ++t) {
        const double mask = t >= first ? 1.0 : 0.0;
        const double wt = mask * (pooling == Pooling::kWeightedMean ? t - cu[s] + 1 : 1);
        weights += wt;
        kept += mask;
        if (pooling == Pooling::kMax && mask > 0) acc = std::max(acc, double{x[t * h + i]});
        if (pooling != Pooling::kMax) acc += wt * x[t * h + i];
      }
      if (pooling == Pooling::kCls) acc = x[first * h + i];
      if (pooling == Pooling::kLastToken) acc = x[(cu[s + 1] - 1) * h + i];
      if (pooling == Pooling::kMean || pooling == Pooling::kWeightedMean) acc /= weights;
      if (pooling == Pooling::kMeanSqrtLen) acc /= std::sqrt(kept);
      out[s * h + i] = acc;
    }
  }
  return out;
}

// SPLADE: log(1 + relu(v)) (log1p once more with `twice`) of every token's
// logits [tokens, vocab], max- or (`sum`) sum-pooled per sequence.
inline std::vector<double> RefSplade(const std::vector<float>& logits,
                                     const std::vector<int32_t>& cu, int vocab, bool sum,
                                     bool twice) {
  const int seqs = static_cast<int>(cu.size()) - 1;
  std::vector<double> out(size_t(seqs) * vocab, 0.0);
  for (int s = 0; s < seqs; ++s)
    for (int v = 0; v < vocab; ++v)
      for (int t = cu[s]; t < cu[s + 1]; ++t) {
        double f = std::log1p(std::max(0.0, double{logits[size_t(t) * vocab + v]}));
        if (twice) f = std::log1p(f);
        double& o = out[size_t(s) * vocab + v];
        o = sum ? o + f : std::max(o, f);
      }
  return out;
}

}  // namespace bertrt::test

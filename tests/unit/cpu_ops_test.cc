// Each CPU op against a naive float64 reference on random inputs, including
// odd sizes that exercise the vector tails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/cpu_ops.h"
#include "model/relative_position.h"
#include "model/rotary.h"

namespace bertrt::cpu {
namespace {

std::vector<float> Random(size_t n, std::mt19937* rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(*rng);
  return v;
}

// max |got - want| / max |want|: a normwise error that does not blow up on
// entries that happen to be near zero.
double NormRelErr(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0.0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

double RefAct(double x, Act act) {
  switch (act) {
    case Act::kNone: return x;
    case Act::kRelu: return std::max(x, 0.0);
    case Act::kTanh: return std::tanh(x);
    case Act::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Act::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return x;
}

void RefLayerNorm(double* row, int n, const float* gamma, const float* beta, double eps) {
  double mean = 0.0, var = 0.0;
  for (int i = 0; i < n; ++i) mean += row[i];
  mean /= n;
  for (int i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
  var /= n;
  for (int i = 0; i < n; ++i) row[i] = (row[i] - mean) / std::sqrt(var + eps) * gamma[i] + beta[i];
}

// The AVX2 erf/tanh/exp behind the activations, swept densely; tanh is also
// held to a relative bound near zero, where a naive formula cancels.
TEST(CpuOps, ActivationsAccurateOverWideRange) {
  std::vector<float> x0;
  for (float x = -12.0f; x <= 12.0f; x += 0.00731f) x0.push_back(x);
  for (Act act : {Act::kGelu, Act::kGeluTanh, Act::kTanh}) {
    std::vector<float> x = x0;
    BiasAct(x.data(), 1, static_cast<int>(x.size()), nullptr, act, 1);
    double err = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      double want = RefAct(x0[i], act);
      double scale = act == Act::kTanh ? std::max(std::abs(want), 1e-3) : 1.0;
      err = std::max(err, std::abs(x[i] - want) / scale);
    }
    EXPECT_LT(err, 1e-6) << static_cast<int>(act);
  }
}

// Both kernels (whichever the machine would pick), every epilogue (the
// residual read from c itself and from a tensor apart), odd sizes (vector and
// block tails), and the weights read at row counts other than the one their
// layout was chosen for.
TEST(CpuOps, LinearMatchesReferenceForEveryEpilogue) {
  std::mt19937 rng(1);
  MatmulContext ctx;
  ASSERT_TRUE(ctx.Init().ok());
  for (Kernel kernel : {Kernel::kMatmul, Kernel::kSgemm})
    for (auto [k, n] : {std::pair{7, 5}, {37, 100}, {48, 144}, {100, 37}}) {
      for (auto [e, apart] : {std::pair{Epilogue::kNone, false}, {Epilogue::kGelu, false},
                              {Epilogue::kGeluTanh, false}, {Epilogue::kRelu, false},
                              {Epilogue::kResidual, false}, {Epilogue::kResidual, true}}) {
        Tensor w = Tensor::ZerosF32({n, k}), b = Tensor::ZerosF32({n});
        std::vector<float> wv = Random(size_t(n) * k, &rng), bv = Random(n, &rng);
        std::copy(wv.begin(), wv.end(), w.mutable_f32());
        std::copy(bv.begin(), bv.end(), b.mutable_f32());
        auto packed = PackLinear({&w}, {&b}, k, "test");
        ASSERT_TRUE(packed.ok());
        auto linear = Linear::Create(std::move(*packed), &ctx, kernel);
        ASSERT_TRUE(linear.ok()) << linear.status().ToString();
        ASSERT_EQ(linear->kernel(), kernel);
        for (int m : {1, 13, 129}) {
          std::vector<float> a = Random(size_t(m) * k, &rng), c0 = Random(size_t(m) * n, &rng);
          std::vector<float> c = apart ? std::vector<float>(c0.size(), -3.0f) : c0;
          const float* residual = e != Epilogue::kResidual ? nullptr : apart ? c0.data() : c.data();
          ASSERT_TRUE(linear->Run(a.data(), m, c.data(), &ctx, 2, e, residual).ok());
          std::vector<double> want(size_t(m) * n);
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              double s = bv[j];
              for (int p = 0; p < k; ++p) s += double{a[i * k + p]} * wv[j * k + p];
              switch (e) {
                case Epilogue::kNone: break;
                case Epilogue::kGelu: s = RefAct(s, Act::kGelu); break;
                case Epilogue::kGeluTanh: s = RefAct(s, Act::kGeluTanh); break;
                case Epilogue::kRelu: s = RefAct(s, Act::kRelu); break;
                case Epilogue::kResidual: s += c0[i * n + j]; break;
              }
              want[i * n + j] = s;
            }
          EXPECT_LT(NormRelErr(c, want), 1e-6)
              << m << "x" << k << "x" << n << " epilogue " << static_cast<int>(e) << " apart "
              << apart << " kernel " << static_cast<int>(kernel);
        }
      }
    }
}

// A row's result must not depend (beyond rounding noise) on how many other
// rows share the GEMM: batched and one-at-a-time runs agree.
TEST(CpuOps, LinearRowDoesNotDependOnRowCount) {
  std::mt19937 rng(7);
  MatmulContext ctx;
  ASSERT_TRUE(ctx.Init().ok());
  const int k = 768, n = 768, m = 300;
  Tensor w = Tensor::ZerosF32({n, k}), b = Tensor::ZerosF32({n});
  std::vector<float> wv = Random(size_t(n) * k, &rng);
  std::copy(wv.begin(), wv.end(), w.mutable_f32());
  std::vector<float> a = Random(size_t(m) * k, &rng);
  for (Kernel kernel : {Kernel::kMatmul, Kernel::kSgemm}) {
    auto packed = PackLinear({&w}, {&b}, k, "test");
    ASSERT_TRUE(packed.ok());
    auto linear = Linear::Create(std::move(*packed), &ctx, kernel);
    ASSERT_TRUE(linear.ok());
    std::vector<float> all(size_t(m) * n), one(n);
    ASSERT_TRUE(linear->Run(a.data(), m, all.data(), &ctx, 2, Epilogue::kGelu).ok());
    for (int r : {0, 1, 150, 299}) {
      ASSERT_TRUE(
          linear->Run(a.data() + size_t(r) * k, 1, one.data(), &ctx, 2, Epilogue::kGelu).ok());
      EXPECT_LT(
          NormRelErr(one, std::vector<double>(all.begin() + r * n, all.begin() + (r + 1) * n)),
          1e-6)
          << "row " << r << " kernel " << static_cast<int>(kernel);
    }
  }
}

TEST(CpuOps, PackLinearConcatenatesAndChecksShapes) {
  Tensor w1 = Tensor::ZerosF32({2, 3}), b1 = Tensor::ZerosF32({2});
  Tensor w2 = Tensor::ZerosF32({1, 3}), b2 = Tensor::ZerosF32({1});
  w2.mutable_f32()[1] = 5.0f;
  b2.mutable_f32()[0] = 7.0f;
  auto p = PackLinear({&w1, &w2}, {&b1, &b2}, 3, "qkv");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->out, 3);
  EXPECT_EQ(p->w[2 * 3 + 1], 5.0f);
  EXPECT_EQ(p->b[2], 7.0f);
  EXPECT_FALSE(PackLinear({&w1}, {&b2}, 3, "bad bias").ok());
  EXPECT_FALSE(PackLinear({&w1}, {&b1}, 4, "bad in").ok());
}

TEST(CpuOps, BiasActMatchesReference) {
  std::mt19937 rng(2);
  for (Act act : {Act::kNone, Act::kGelu, Act::kGeluTanh, Act::kRelu, Act::kTanh}) {
    for (auto [m, n] : {std::pair{1, 1}, {3, 37}, {5, 100}, {2, 3072}}) {
      std::vector<float> x0 = Random(size_t(m) * n, &rng, -6.0f, 6.0f);
      std::vector<float> bias = Random(n, &rng);
      std::vector<float> x = x0;
      BiasAct(x.data(), m, n, bias.data(), act, 2);
      std::vector<double> want(x.size());
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
          want[i * n + j] = RefAct(double{x0[i * n + j]} + bias[j], act);
      double err = 0.0;
      for (size_t i = 0; i < x.size(); ++i) err = std::max(err, std::abs(x[i] - want[i]));
      EXPECT_LT(err, 2e-6) << static_cast<int>(act) << " " << m << "x" << n;
    }
  }
}

TEST(CpuOps, LayerNormMatchesReferenceInPlaceAndApart) {
  std::mt19937 rng(3);
  for (auto [m, n] : {std::pair{1, 1}, {4, 37}, {3, 48}, {2, 768}}) {
    for (bool in_place : {false, true}) {
      std::vector<float> x0 = Random(size_t(m) * n, &rng, -3.0f, 5.0f);
      std::vector<float> gamma = Random(n, &rng), beta = Random(n, &rng);
      std::vector<float> x = x0, out(x.size(), -7.0f);
      float* y = in_place ? x.data() : out.data();
      LayerNorm(x.data(), y, m, n, gamma.data(), beta.data(), 1e-5f, 2);
      std::vector<double> want(x.size());
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) want[i * n + j] = x0[i * n + j];
        RefLayerNorm(&want[i * n], n, gamma.data(), beta.data(), 1e-5);
      }
      EXPECT_LT(NormRelErr(std::vector<float>(y, y + x.size()), want), 2e-6) << m << "x" << n;
      if (!in_place) EXPECT_EQ(x, x0) << "the input is left as it was";
    }
  }
}

TEST(CpuOps, EmbedLayerNormUsesPositionWithinEachSequence) {
  std::mt19937 rng(4);
  const int h = 37, vocab = 11, max_pos = 9, types = 2;
  std::vector<float> word = Random(vocab * h, &rng), pos = Random(max_pos * h, &rng),
                     type = Random(types * h, &rng), gamma = Random(h, &rng),
                     beta = Random(h, &rng);
  const std::vector<int32_t> ids = {1, 5, 10, 0, 3, 3, 7, 2, 9, 4};
  const std::vector<int32_t> tt = {0, 1, 1, 0, 0, 1, 0, 1, 1, 0};
  const std::vector<int32_t> cu = {0, 1, 3, 10};
  std::vector<float> out(ids.size() * h);
  EmbedLayerNorm(ids.data(), tt.data(), cu.data(), 3,
                 {word.data(), pos.data(), type.data(), gamma.data(), beta.data()}, h, 1e-12f,
                 out.data(), 2);
  std::vector<double> want(out.size());
  for (int s = 0; s < 3; ++s)
    for (int t = cu[s]; t < cu[s + 1]; ++t) {
      for (int i = 0; i < h; ++i)
        want[t * h + i] = double{word[ids[t] * h + i]} + pos[(t - cu[s]) * h + i] + type[tt[t] * h + i];
      RefLayerNorm(&want[t * h], h, gamma.data(), beta.data(), 1e-12);
    }
  EXPECT_LT(NormRelErr(out, want), 2e-6);
}

// `bias`: [heads][2 * span - 1] added to each score by key - query distance (empty: none).
std::vector<double> RefAttention(const std::vector<float>& qkv, const std::vector<int32_t>& cu,
                                 int h, int heads, const std::vector<float>& bias = {},
                                 int span = 0, int window = 0) {
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

TEST(CpuOps, AttentionIsPerSequenceAndHead) {
  std::mt19937 rng(5);
  for (auto [h, heads] : {std::pair{48, 3}, {32, 4}, {12, 1}}) {
    const std::vector<int32_t> cu = {0, 1, 3, 10, 74};
    const int max_len = 64, tokens = cu.back();
    std::vector<float> qkv = Random(size_t(tokens) * 3 * h, &rng, -2.0f, 2.0f);
    std::vector<float> ctx(size_t(tokens) * h), scratch(AttentionScratchFloats(max_len, 2));
    Attention(qkv.data(), cu.data(), 4, max_len, h, heads, {}, ctx.data(), scratch.data(), 2);
    EXPECT_LT(NormRelErr(ctx, RefAttention(qkv, cu, h, heads)), 2e-6) << h << "/" << heads;
  }
}

// ModernBERT's local layers: each query sees the keys within `window`
// positions; sequences shorter and longer than the window.
// Local windows go in blocks of queries against the keys they reach: short
// sequences, and one of 300 tokens (several blocks, windows narrower and
// wider than a block), with and without a relative position bias.
TEST(CpuOps, AttentionWindowMasksFarKeys) {
  std::mt19937 rng(9);
  const int h = 32, heads = 4;
  const std::vector<int32_t> cu = {0, 3, 40, 52, 352};
  const int max_len = 300, tokens = cu.back(), span = 300;
  std::vector<float> qkv = Random(size_t(tokens) * 3 * h, &rng, -2.0f, 2.0f);
  const std::vector<float> bias = Random(size_t(heads) * (2 * span - 1), &rng, -2.0f, 2.0f);
  std::vector<float> ctx(size_t(tokens) * h), scratch(AttentionScratchFloats(max_len, 2));
  for (int window : {4, 40, 100}) {
    Attention(qkv.data(), cu.data(), 4, max_len, h, heads, {}, ctx.data(), scratch.data(), 2,
              {window});
    EXPECT_LT(NormRelErr(ctx, RefAttention(qkv, cu, h, heads, {}, 0, window)), 2e-6) << window;
    EXPECT_GT(NormRelErr(ctx, RefAttention(qkv, cu, h, heads)), 1e-2) << window;
    Attention(qkv.data(), cu.data(), 4, max_len, h, heads, {bias.data(), span}, ctx.data(),
              scratch.data(), 2, {window});
    EXPECT_LT(NormRelErr(ctx, RefAttention(qkv, cu, h, heads, bias, span, window)), 2e-6)
        << window << " with a bias";
  }
}

// Rotary positions as transformers' apply_rotary_pos_emb computes them
// (rotate_half: the pair (x[i], x[i + d/2])), against a double reference;
// V is left alone and each sequence counts positions from 0.
TEST(CpuOps, RotaryRotatesQueryAndKeyPairsByPosition) {
  std::mt19937 rng(10);
  const int h = 32, heads = 4, d = h / heads;
  const std::vector<int32_t> cu = {0, 5, 69};
  const int tokens = cu.back();
  const std::vector<float> before = Random(size_t(tokens) * 3 * h, &rng);
  std::vector<float> qkv = before;
  const float theta = 10000.0f;
  ApplyRotary(qkv.data(), cu.data(), 2, h, heads, RotaryTable(theta, d, 64).data(), 2);
  std::vector<double> want(before.begin(), before.end());
  for (int s = 0; s < 2; ++s)
    for (int t = cu[s]; t < cu[s + 1]; ++t)
      for (int part = 0; part < 2; ++part)
        for (int hd = 0; hd < heads; ++hd)
          for (int i = 0; i < d / 2; ++i) {
            const double angle = (t - cu[s]) * std::pow(double{theta}, -2.0 * i / d);
            const size_t at = size_t(t) * 3 * h + part * h + hd * d;
            const double a = before[at + i], b = before[at + i + d / 2];
            want[at + i] = a * std::cos(angle) - b * std::sin(angle);
            want[at + i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
          }
  // float32 angles, as transformers takes them: up to 64 * 2^-24 off.
  EXPECT_LT(NormRelErr(qkv, want), 1e-5);
}

TEST(CpuOps, GatedGeluMultipliesTheActivatedHalfByTheGate) {
  std::mt19937 rng(11);
  const int rows = 3, inter = 37;
  const std::vector<float> in = Random(size_t(rows) * 2 * inter, &rng, -4.0f, 4.0f);
  for (const bool tanh_form : {false, true}) {
    std::vector<float> out(size_t(rows) * inter);
    GatedGelu(in.data(), rows, inter, tanh_form, out.data(), 2);
    std::vector<double> want(out.size());
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < inter; ++i)
        want[r * inter + i] = RefAct(in[r * 2 * inter + i], tanh_form ? Act::kGeluTanh : Act::kGelu) *
                              in[r * 2 * inter + inter + i];
    EXPECT_LT(NormRelErr(out, want), 1e-6) << tanh_form;
  }
}

// transformers' MPNet relative_position_bucket(j - i, 32, 128), by hand:
// exact buckets below 8, then log-spaced up to 15, the upper half for keys
// after the query.
TEST(RelativePosition, BucketsAsTransformersMpnet) {
  const std::pair<int, int> cases[] = {{0, 0},   {-1, 1},   {1, 17},   {-7, 7},   {-8, 8},
                                       {-15, 9}, {-16, 10}, {-31, 11}, {-32, 12}, {-63, 13},
                                       {-64, 14}, {-127, 15}, {-128, 15}, {-511, 15}, {16, 26},
                                       {64, 30}, {511, 31}};
  for (auto [relative, bucket] : cases)
    EXPECT_EQ(RelativePositionBucket(relative, 32), bucket) << relative;
}

TEST(CpuOps, AttentionAddsTheRelativePositionBiasByDistance) {
  std::mt19937 rng(15);
  const int h = 32, heads = 4, span = 80, max_len = 64;
  const std::vector<int32_t> cu = {0, 1, 9, 73};
  const int tokens = cu.back();
  std::vector<float> qkv = Random(size_t(tokens) * 3 * h, &rng, -1.0f, 1.0f);
  // Large enough to move the softmax: a bias lost or read at the wrong
  // distance shows.
  std::vector<float> bias = Random(size_t(heads) * (2 * span - 1), &rng, -3.0f, 3.0f);
  std::vector<float> ctx(size_t(tokens) * h), scratch(AttentionScratchFloats(max_len, 2));
  Attention(qkv.data(), cu.data(), 3, max_len, h, heads, {bias.data(), span}, ctx.data(),
            scratch.data(), 2);
  EXPECT_LT(NormRelErr(ctx, RefAttention(qkv, cu, h, heads, bias, span)), 2e-6);
  EXPECT_GT(NormRelErr(ctx, RefAttention(qkv, cu, h, heads)), 1e-2);
}

// SPLADE's pooling in chunks of tokens that cut sequences apart, against
// log(1 + relu) (twice) max- or sum-pooled per sequence in double.
TEST(CpuOps, SpladePoolAcrossChunksMatchesReference) {
  std::mt19937 rng(12);
  const int vocab = 700, tokens = 11;  // more columns than one 256-column block
  const std::vector<int32_t> cu = {0, 1, 4, 11};
  const std::vector<float> logits = Random(tokens * vocab, &rng);
  for (const bool sum : {false, true}) {
    for (const bool twice : {false, true}) {
      std::vector<float> out(3 * vocab, 0.0f);
      // Chunks 0-2, 3-6, 7-10: the second and third split sequence 2.
      for (const auto [first, rows] : {std::pair{0, 3}, std::pair{3, 4}, std::pair{7, 4}})
        SpladePool(logits.data() + first * vocab, first, rows, cu.data(), 3, vocab, sum, twice,
                   out.data(), 2);
      double worst = 0;
      for (int s = 0; s < 3; ++s) {
        for (int v = 0; v < vocab; ++v) {
          double want = 0;
          for (int t = cu[s]; t < cu[s + 1]; ++t) {
            double f = std::log1p(std::max(0.0, double{logits[t * vocab + v]}));
            if (twice) f = std::log1p(f);
            want = sum ? want + f : std::max(want, f);
          }
          worst = std::max(worst, std::fabs(out[s * vocab + v] - want));
        }
      }
      EXPECT_LT(worst, 1e-6) << "sum " << sum << " twice " << twice;
    }
  }
}

TEST(CpuOps, PoolingAndNormalize) {
  std::mt19937 rng(6);
  const int h = 37;
  const std::vector<int32_t> cu = {0, 1, 4, 11};
  std::vector<float> x = Random(11 * h, &rng);
  // Each mode into its own columns of a wider row, as concatenated pooling does.
  const Pooling modes[] = {Pooling::kCls,         Pooling::kMean,         Pooling::kMax,
                           Pooling::kMeanSqrtLen, Pooling::kWeightedMean, Pooling::kLastToken};
  const int stride = 6 * h;
  // Null pools every token; the second pools from a prompt's end
  // (include_prompt false): sentence-transformers masks the tokens before it,
  // so cls is the first one not masked and the weights still count from 1 at
  // the sequence's first token.
  const std::vector<int32_t> no_skip = {0, 0, 0}, skips = {0, 1, 3};
  for (const std::vector<int32_t>* start : {&no_skip, &skips}) {
    std::vector<float> out(3 * stride, -7.0f);
    for (int k = 0; k < 6; ++k)
      PoolSequences(x.data(), cu.data(), start == &no_skip ? nullptr : start->data(), 3, h,
                    modes[k], out.data() + k * h, stride);
    for (int k = 0; k < 6; ++k) {
      const Pooling pooling = modes[k];
      std::vector<float> got;
      std::vector<double> want(3 * h);
      for (int s = 0; s < 3; ++s) {
        got.insert(got.end(), out.begin() + s * stride + k * h,
                   out.begin() + s * stride + (k + 1) * h);
        const int first = cu[s] + (*start)[s];
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
          want[s * h + i] = acc;
        }
      }
      EXPECT_LT(NormRelErr(got, want), 1e-6)
          << PoolingName(pooling) << (start == &skips ? " from the prompts' ends" : "");
    }
  }
  std::vector<float> rows = {3.0f, 4.0f, 0.0f, 0.0f};
  L2NormalizeRows(rows.data(), 2, 2);
  EXPECT_FLOAT_EQ(rows[0], 0.6f);
  EXPECT_FLOAT_EQ(rows[1], 0.8f);
  EXPECT_EQ(rows[2], 0.0f);
}

}  // namespace
}  // namespace bertrt::cpu

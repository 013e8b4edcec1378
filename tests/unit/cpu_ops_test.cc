// The CPU kernels' own cases against float64 references (op_reference.h): the
// activations' accuracy, both GEMM kernels, odd sizes that exercise the vector
// tails, attention's blocking at several head sizes and windows. The ops as
// the forward calls them are held in ops_harness_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/cpu_ops.h"
#include "core/half.h"
#include "model/relative_position.h"
#include "op_reference.h"

namespace bertrt::cpu {
namespace {

using test::NormRelErr;
using test::Random;
using test::RefAttention;

double RefAct(double x, Act act) {
  switch (act) {
    case Act::kNone: return x;
    case Act::kRelu: return std::max(x, 0.0);
    case Act::kTanh: return std::tanh(x);
    case Act::kGelu: return test::RefGelu(x);
    case Act::kGeluTanh: return test::RefGeluTanh(x);
    case Act::kSigmoid: return test::RefDense(x, DenseActivation::kSigmoid);
  }
  return x;
}

// A Linear's weights [n, k] and bias [n] of normal random values (drawn in
// that order), as tensors for PackLinear and as values for the references.
struct RandomLinear {
  Tensor w, b;
  std::vector<float> wv, bv;
};

RandomLinear MakeRandomLinear(int n, int k, std::mt19937* rng) {
  RandomLinear l{Tensor::ZerosF32({n, k}), Tensor::ZerosF32({n}), Random(size_t(n) * k, rng),
                 Random(n, rng)};
  std::copy(l.wv.begin(), l.wv.end(), l.w.mutable_f32());
  std::copy(l.bv.begin(), l.bv.end(), l.b.mutable_f32());
  return l;
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
        auto [w, b, wv, bv] = MakeRandomLinear(n, k, &rng);
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

// A bf16 Linear is its operands rounded to bf16 (to nearest even), multiplied
// and accumulated in fp32: within fp32's rounding of the float64 product of
// the rounded operands, and clearly not the fp32 Linear.
TEST(CpuOps, Bf16LinearIsItsRoundedOperandsProduct) {
  std::mt19937 rng(23);
  MatmulContext ctx;
  ASSERT_TRUE(ctx.Init().ok());
  const int k = 128, n = 96;
  auto [w, b, wv, bv] = MakeRandomLinear(n, k, &rng);
  auto bf16 = [](const std::vector<float>& x) {
    std::vector<uint16_t> narrow(x.size());
    std::vector<float> back(x.size());
    NarrowFromFloat(bertrt::DType::kBF16, x.data(), x.size(), narrow.data());
    WidenToFloat(bertrt::DType::kBF16, narrow.data(), x.size(), back.data());
    return back;
  };
  auto packed = PackLinear({&w}, {&b}, k, "test");
  ASSERT_TRUE(packed.ok());
  auto sgemm = Linear::Create(std::move(*packed), &ctx, Kernel::kSgemm);
  ASSERT_TRUE(sgemm.ok());
  EXPECT_EQ(sgemm->UseBf16(&ctx).code(), StatusCode::kUnimplemented);
  packed = PackLinear({&w}, {&b}, k, "test");
  auto linear = Linear::Create(std::move(*packed), &ctx, Kernel::kMatmul);
  ASSERT_TRUE(linear.ok());
  auto fp32 = PackLinear({&w}, {&b}, k, "test");
  auto reference32 = Linear::Create(std::move(*fp32), &ctx, Kernel::kMatmul);
  ASSERT_TRUE(reference32.ok());
  if (Status s = linear->UseBf16(&ctx); !s.ok()) {
    ASSERT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
    GTEST_SKIP() << s.message();
  }
  const std::vector<float> wr = bf16(wv);
  for (int m : {1, 13, 129}) {
    const std::vector<float> a = Random(size_t(m) * k, &rng, -3.0f, 3.0f), ar = bf16(a);
    const std::vector<float> c0 = Random(size_t(m) * n, &rng);
    for (auto [e, apart] : {std::pair{Epilogue::kNone, false}, {Epilogue::kGelu, false},
                            {Epilogue::kResidual, false}, {Epilogue::kResidual, true}}) {
      std::vector<float> c = apart ? std::vector<float>(c0.size(), -3.0f) : c0, c32 = c;
      const float* residual = e != Epilogue::kResidual ? nullptr : apart ? c0.data() : c.data();
      const float* residual32 = e != Epilogue::kResidual ? nullptr : apart ? c0.data() : c32.data();
      ASSERT_TRUE(linear->Run(a.data(), m, c.data(), &ctx, 2, e, residual).ok());
      ASSERT_TRUE(reference32->Run(a.data(), m, c32.data(), &ctx, 2, e, residual32).ok());
      std::vector<double> want(size_t(m) * n);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = bv[j];
          for (int p = 0; p < k; ++p) s += double{ar[i * k + p]} * wr[j * k + p];
          if (e == Epilogue::kGelu) s = test::RefGelu(s);
          if (e == Epilogue::kResidual) s += c0[i * n + j];
          want[i * n + j] = s;
        }
      EXPECT_LT(NormRelErr(c, want), 2e-6) << "m " << m << " epilogue " << int(e);
      EXPECT_GT(NormRelErr(c32, want), 1e-4) << "the fp32 Linear is not the bf16 one";
    }
  }
}

// The int8 GEMM: exactly what its quantized input and weights give (int32
// sums, then one float scaling), for every epilogue, at several row counts;
// and within rounding's error of the fp32 result on the input clipped to
// the calibrated bound.
TEST(CpuOps, Int8LinearIsItsQuantizedOperandsProduct) {
  std::mt19937 rng(21);
  MatmulContext ctx;
  ASSERT_TRUE(ctx.Init().ok());
  // (101: the vector quantizer's 32-wide steps and a remainder.)
  const int k = 101, n = 80;
  auto [w, b, wv, bv] = MakeRandomLinear(n, k, &rng);
  for (Kernel kernel : {Kernel::kMatmul, Kernel::kSgemm}) {
    auto packed = PackLinear({&w}, {&b}, k, "test");
    ASSERT_TRUE(packed.ok());
    auto linear = Linear::Create(std::move(*packed), &ctx, kernel);
    ASSERT_TRUE(linear.ok());
    const float bound = 3.0f;  // |x| the input scale covers; beyond it values clip
    ASSERT_TRUE(linear->Quantize(QuantFormat::kInt8, bound / 127.0f, &ctx).ok());
    EXPECT_TRUE(linear->uses_quantized());
    // The operands as the GEMM sees them.
    std::vector<double> wq(wv.size()), w_scale(n);
    for (int j = 0; j < n; ++j) {
      double max = 0;
      for (int p = 0; p < k; ++p) max = std::max(max, std::abs(double{wv[j * k + p]}));
      w_scale[j] = max / 127.0;
      for (int p = 0; p < k; ++p)
        wq[j * k + p] = std::nearbyint(double{wv[j * k + p]} / w_scale[j]) * w_scale[j];
    }
    for (int m : {1, 13, 129}) {
      // Some inputs beyond the bound: they clip to it.
      std::vector<float> a = Random(size_t(m) * k, &rng, -4.0f, 4.0f);
      const std::vector<float> c0 = Random(size_t(m) * n, &rng);
      for (auto [e, apart] : {std::pair{Epilogue::kNone, false}, {Epilogue::kGelu, false},
                              {Epilogue::kResidual, false}, {Epilogue::kResidual, true}}) {
        std::vector<float> c = apart ? std::vector<float>(c0.size(), -3.0f) : c0;
        const float* residual = e != Epilogue::kResidual ? nullptr : apart ? c0.data() : c.data();
        ASSERT_TRUE(linear->Run(a.data(), m, c.data(), &ctx, 2, e, residual).ok());
        std::vector<double> want(size_t(m) * n), exact(size_t(m) * n);
        const double a_scale = bound / 127.0;
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            double s = bv[j], t = bv[j];
            for (int p = 0; p < k; ++p) {
              const double aq =
                  std::clamp(std::nearbyint(a[i * k + p] / a_scale), -127.0, 127.0) * a_scale;
              s += aq * wq[j * k + p];
              t += std::clamp(double{a[i * k + p]}, -double{bound}, double{bound}) * wv[j * k + p];
            }
            if (e == Epilogue::kGelu) s = test::RefGelu(s), t = test::RefGelu(t);
            if (e == Epilogue::kResidual) s += c0[i * n + j], t += c0[i * n + j];
            want[i * n + j] = s;
            exact[i * n + j] = t;
          }
        EXPECT_LT(NormRelErr(c, want), 2e-6) << "rows " << m << " epilogue " << int(e);
        // Rounding's error beside the fp32 product of the clipped input: each
        // operand off by up to half a step of 1/127 of its range.
        EXPECT_LT(NormRelErr(c, exact), 0.02) << "rows " << m << " epilogue " << int(e);
      }
    }
  }
}

// Per token (the default): each row onto uint8 by its own [min, max] and
// zero point, the input's columns divided by SmoothQuant's divisors and the
// weights' multiplied by them; exactly what those operands give.
TEST(CpuOps, Int8LinearPerTokenIsItsQuantizedOperandsProduct) {
  std::mt19937 rng(22);
  MatmulContext ctx;
  ASSERT_TRUE(ctx.Init().ok());
  const int k = 70, n = 48;  // 32-wide steps and a remainder
  auto [w, b, wv, bv] = MakeRandomLinear(n, k, &rng);
  auto packed = PackLinear({&w}, {&b}, k, "test");
  ASSERT_TRUE(packed.ok());
  auto linear = Linear::Create(std::move(*packed), &ctx);
  ASSERT_TRUE(linear.ok());
  std::vector<float> column_max(k);
  for (float& v : column_max) v = std::uniform_real_distribution<float>(0.5f, 20.0f)(rng);
  auto smoothing = linear->SmoothingDivisors(column_max, 0.5f, &ctx);
  ASSERT_TRUE(smoothing.ok());
  ASSERT_TRUE(linear->Quantize(QuantFormat::kInt8, 0.0f, &ctx, *smoothing).ok());
  // The weights as the GEMM holds them: columns smoothed, rows quantized.
  std::vector<double> wq(wv.size());
  for (int j = 0; j < n; ++j) {
    double max = 0;
    for (int p = 0; p < k; ++p)
      max = std::max(max, std::abs(double{wv[j * k + p] * (*smoothing)[p]}));
    const double scale = max / 127.0;
    for (int p = 0; p < k; ++p)
      wq[j * k + p] = std::nearbyint(double{wv[j * k + p] * (*smoothing)[p]} / scale) * scale;
  }
  for (int m : {1, 7, 130}) {
    // Rows of different ranges, one mostly above zero (as after a GELU).
    std::vector<float> a = Random(size_t(m) * k, &rng, -3.0f, 3.0f);
    for (int p = 0; p < k; ++p) a[p] = std::abs(a[p]) * 5.0f - 0.17f;
    std::vector<float> c(size_t(m) * n, -3.0f);
    ASSERT_TRUE(linear->Run(a.data(), m, c.data(), &ctx, 2, Epilogue::kGelu).ok());
    std::vector<double> want(size_t(m) * n);
    for (int i = 0; i < m; ++i) {
      std::vector<double> x(k);
      double lo = 0, hi = 0;
      for (int p = 0; p < k; ++p) {
        x[p] = double{a[i * k + p] * (1.0f / (*smoothing)[p])};
        lo = std::min(lo, x[p]), hi = std::max(hi, x[p]);
      }
      const double s = (hi - lo) / 255.0, z = std::nearbyint(-lo / s);
      for (int p = 0; p < k; ++p)
        x[p] = (std::clamp(std::nearbyint(x[p] / s) + z, 0.0, 255.0) - z) * s;
      for (int j = 0; j < n; ++j) {
        double sum = bv[j];
        for (int p = 0; p < k; ++p) sum += x[p] * wq[j * k + p];
        want[i * n + j] = test::RefGelu(sum);
      }
    }
    EXPECT_LT(NormRelErr(c, want), 2e-6) << "rows " << m;
  }
  // Back to fp32 on request, with both GEMMs kept until dropped.
  linear->UseQuantized(false);
  EXPECT_FALSE(linear->uses_quantized());
  std::vector<float> a = Random(size_t(3) * k, &rng), c(size_t(3) * n);
  ASSERT_TRUE(linear->Run(a.data(), 3, c.data(), &ctx, 2).ok());
  EXPECT_LT(NormRelErr(c, test::RefLinear(a, 3, k, wv, bv, n)), 2e-6);
}

// fp8, emulated: the weights onto E4M3 with one scale (max |w| to 448), the
// input with its calibrated one (values beyond 448 steps saturate), fp32
// products; exactly what those operands give, and within E4M3's rounding
// (3 mantissa bits: half a step is 1/16 of a value) of the exact product.
TEST(CpuOps, Fp8LinearIsItsRoundedOperandsProduct) {
  std::mt19937 rng(23);
  MatmulContext ctx;
  ASSERT_TRUE(ctx.Init().ok());
  const int k = 96, n = 80;
  auto [w, b, wv, bv] = MakeRandomLinear(n, k, &rng);
  double w_max = 0;
  for (float v : wv) w_max = std::max(w_max, std::abs(double{v}));
  // (In fp32, as the GEMM scales: a tie flipped by rounding would move a
  // value by a whole E4M3 step.)
  const float w_scale = float(w_max) / 448.0f;
  std::vector<double> wq(wv.size());
  for (size_t i = 0; i < wv.size(); ++i)
    wq[i] = double{E4M3ToFloat(FloatToE4M3(wv[i] / w_scale))} * w_scale;
  auto packed = PackLinear({&w}, {&b}, k, "test");
  ASSERT_TRUE(packed.ok());
  auto linear = Linear::Create(std::move(*packed), &ctx);
  ASSERT_TRUE(linear.ok());
  const float bound = 3.0f;
  EXPECT_FALSE(linear->Quantize(QuantFormat::kFp8, bound / 448.0f, &ctx, {1.0f}).ok())
      << "fp8 takes no smoothing";
  ASSERT_TRUE(linear->Quantize(QuantFormat::kFp8, bound / 448.0f, &ctx).ok());
  const QuantizedLinear* q = linear->QuantizedOperands();
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->weights.dtype(), DType::kF8E4M3);
  EXPECT_EQ(q->scales.numel(), 1);
  for (int m : {1, 13, 129}) {
    std::vector<float> a = Random(size_t(m) * k, &rng, -4.0f, 4.0f);
    const std::vector<float> c0 = Random(size_t(m) * n, &rng);
    for (Epilogue e : {Epilogue::kNone, Epilogue::kGelu, Epilogue::kResidual}) {
      std::vector<float> c = c0;
      ASSERT_TRUE(
          linear->Run(a.data(), m, c.data(), &ctx, 2, e, e == Epilogue::kResidual ? c.data() : nullptr)
              .ok());
      std::vector<double> want(size_t(m) * n), exact(size_t(m) * n);
      const float a_scale = bound / 448.0f, a_inverse = 1.0f / a_scale;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = bv[j], t = bv[j];
          for (int p = 0; p < k; ++p) {
            const float x = a[i * k + p];
            s += double{RoundToE4M3(x * a_inverse) * a_scale} * wq[j * k + p];
            t += std::clamp(double{x}, -double{bound}, double{bound}) * wv[j * k + p];
          }
          if (e == Epilogue::kGelu) s = test::RefGelu(s), t = test::RefGelu(t);
          if (e == Epilogue::kResidual) s += c0[i * n + j], t += c0[i * n + j];
          want[i * n + j] = s;
          exact[i * n + j] = t;
        }
      EXPECT_LT(NormRelErr(c, want), 2e-6) << "rows " << m << " epilogue " << int(e);
      EXPECT_LT(NormRelErr(c, exact), 0.06) << "rows " << m << " epilogue " << int(e);
    }
  }
  // An fp8 plan's operands make the same GEMM.
  auto again = Linear::FromQuantized(*q, bv, &ctx);
  ASSERT_TRUE(again.ok()) << again.status().message();
  std::vector<float> a = Random(size_t(5) * k, &rng), c1(size_t(5) * n), c2(size_t(5) * n);
  ASSERT_TRUE(linear->Run(a.data(), 5, c1.data(), &ctx, 2).ok());
  ASSERT_TRUE(again->Run(a.data(), 5, c2.data(), &ctx, 2).ok());
  EXPECT_EQ(c1, c2);
  // A plan's operands with a NaN-free but zero input scale are refused.
  QuantizedLinear bad = *q;
  bad.input_scale = 0.0f;
  EXPECT_FALSE(Linear::FromQuantized(bad, bv, &ctx).ok());
}

}  // namespace
}  // namespace bertrt::cpu

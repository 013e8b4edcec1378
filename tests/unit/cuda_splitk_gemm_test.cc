// The split-K GEMM (splitk_gemm.h) against a float64 reference on the host:
// row counts inside and on the edges of its 64-row tiles, K
// splits from 1 to 8 ways (each way's share a whole or uneven number of
// slices), every epilogue, with and without a residual, fp16 and bf16. The
// engine tests run it only where the engine picks it (batches of few
// tokens), and only through whole models.
#if BERTRT_HAVE_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/gemm/splitk_gemm.h"
#include "cuda_test_util.h"

namespace bertrt::cuda {
namespace {

using test_util::DeviceBuffer;
using test_util::FromBits;

struct Shape {
  int rows, in, out;
};

using Matrix = test_util::RoundedMatrix;
constexpr auto Random = test_util::RandomRounded;

double Activate(double v, Epilogue e) {
  if (e == Epilogue::kBiasRelu) return std::max(v, 0.0);
  if (e == Epilogue::kBiasGeluTanh)
    return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  if (e == Epilogue::kBiasGelu) return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  return v;
}

const char* EpilogueName(Epilogue e) {
  switch (e) {
    case Epilogue::kBias:
      return "bias";
    case Epilogue::kBiasGeluTanh:
      return "bias+gelu_tanh";
    case Epilogue::kBiasRelu:
      return "bias+relu";
    case Epilogue::kBiasGelu:
      return "bias+gelu";
  }
  return "?";
}

class CudaSplitKGemmTest : public test_util::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!SplitKLinearApplies(Precision::kFp16, gpu_.compute_capability, 1, 64, 64, Epilogue::kBias))
      GTEST_SKIP() << "the split-K GEMM needs an sm_90 GPU and a build with sm_90a";
  }

  // Runs the kernel and returns its output's values; unwritten elements
  // read as NaN.
  std::vector<double> Run(Precision p, const Shape& s, const Matrix& x, const Matrix& w,
                          const Matrix& bias, const Matrix* residual, Epilogue e) {
    const size_t out_n = static_cast<size_t>(s.rows) * s.out;
    DeviceBuffer dx(x.bits.size() * 2), dw(w.bits.size() * 2), db(bias.bits.size() * 2),
        dr(out_n * 2), dy(out_n * 2);
    cudaMemcpy(dx.ptr, x.bits.data(), x.bits.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dw.ptr, w.bits.data(), w.bits.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(db.ptr, bias.bits.data(), bias.bits.size() * 2, cudaMemcpyHostToDevice);
    if (residual) cudaMemcpy(dr.ptr, residual->bits.data(), out_n * 2, cudaMemcpyHostToDevice);
    cudaMemset(dy.ptr, 0xff, out_n * 2);
    const SplitKGemmArgs a{dx.ptr, s.rows,   s.in, dw.ptr,
                           db.ptr, s.out,    e,    residual ? dr.ptr : nullptr,
                           dy.ptr, sm_count_};
    const Status st = SplitKLinear(p, a, Stream{nullptr, false});
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> y(out_n);
    cudaMemcpy(y.data(), dy.ptr, out_n * 2, cudaMemcpyDeviceToHost);
    std::vector<double> got(out_n);
    for (size_t i = 0; i < out_n; ++i) got[i] = FromBits(y[i], p);
    return got;
  }
};

TEST_F(CudaSplitKGemmTest, MatchesAFloat64Reference) {
  const std::vector<Shape> shapes = {
      {1, 768, 768},    {7, 768, 2304},  {64, 3072, 768}, {65, 768, 3072},   {128, 768, 768},
      {128, 3072, 768}, {129, 192, 320}, {200, 64, 128},  {256, 1024, 1024}, {33, 448, 64},
  };
  std::set<int> ways_seen;
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    std::mt19937 rng(11);
    for (const Shape& s : shapes) {
      ways_seen.insert(SplitKWays(s.rows, s.in, s.out, sm_count_));
      // Products of unit-scale x and 1/sqrt(in)-scale weights: outputs of
      // a few units, as a trained layer's.
      const Matrix x = Random(static_cast<size_t>(s.rows) * s.in, 1.0f, p, rng);
      const Matrix w = Random(static_cast<size_t>(s.out) * s.in, 1.0f / std::sqrt(s.in), p, rng);
      const Matrix bias = Random(s.out, 0.5f, p, rng);
      const Matrix residual = Random(static_cast<size_t>(s.rows) * s.out, 1.0f, p, rng);
      std::vector<double> dot(static_cast<size_t>(s.rows) * s.out);
      for (int r = 0; r < s.rows; ++r)
        for (int c = 0; c < s.out; ++c) {
          double sum = 0;
          for (int k = 0; k < s.in; ++k)
            sum +=
                x.val[static_cast<size_t>(r) * s.in + k] * w.val[static_cast<size_t>(c) * s.in + k];
          dot[static_cast<size_t>(r) * s.out + c] = sum + bias.val[c];
        }
      for (Epilogue e :
           {Epilogue::kBias, Epilogue::kBiasGeluTanh, Epilogue::kBiasRelu, Epilogue::kBiasGelu})
        for (bool with_residual : {false, true}) {
          const std::vector<double> got =
              Run(p, s, x, w, bias, with_residual ? &residual : nullptr, e);
          double worst = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double want = Activate(dot[i] + (with_residual ? residual.val[i] : 0.0), e);
            // One rounding of the output (fp16: 2^-11, bf16: 2^-8 relative)
            // plus fp32 accumulation over `in` terms.
            const double bound = (p == Precision::kFp16 ? 1e-3 : 8e-3) * std::abs(want) + 1e-3;
            worst =
                std::max(worst, std::isfinite(got[i]) ? std::abs(got[i] - want) / bound : INFINITY);
          }
          EXPECT_LE(worst, 1.0) << PrecisionName(p) << " " << s.rows << " x " << s.in << " -> "
                                << s.out << " " << EpilogueName(e)
                                << (with_residual ? " + residual" : "") << " ("
                                << SplitKWays(s.rows, s.in, s.out, sm_count_) << " ways)";
        }
    }
  }
  // The shapes reach a single way and the largest cluster.
  EXPECT_TRUE(ways_seen.count(1)) << "no shape ran unsplit";
  EXPECT_TRUE(ways_seen.count(8)) << "no shape ran 8 ways";
}

TEST_F(CudaSplitKGemmTest, GivesTheSameBitsEveryRun) {
  // The ways' partials are summed in a fixed order, not as they arrive.
  const Shape s{128, 3072, 768};
  ASSERT_GT(SplitKWays(s.rows, s.in, s.out, sm_count_), 1);
  std::mt19937 rng(3);
  const Matrix x = Random(static_cast<size_t>(s.rows) * s.in, 1.0f, Precision::kFp16, rng);
  const Matrix w = Random(static_cast<size_t>(s.out) * s.in, 0.02f, Precision::kFp16, rng);
  const Matrix bias = Random(s.out, 0.5f, Precision::kFp16, rng);
  const std::vector<double> first = Run(Precision::kFp16, s, x, w, bias, nullptr, Epilogue::kBias);
  for (int run = 0; run < 5; ++run)
    EXPECT_EQ(Run(Precision::kFp16, s, x, w, bias, nullptr, Epilogue::kBias), first);
}

TEST_F(CudaSplitKGemmTest, TakesOnlyShapesItRunsAndBeatsCublasLtAt) {
  const int cc = gpu_.compute_capability;
  EXPECT_TRUE(SplitKLinearApplies(Precision::kFp16, cc, 128, 768, 768,
                                  Epilogue::kBias));  // attention output, b1
  EXPECT_TRUE(SplitKLinearApplies(Precision::kBf16, cc, 128, 3072, 768,
                                  Epilogue::kBias));  // FFN output, b1
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp16, cc, 129, 768, 768, Epilogue::kBias));
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp16, cc, 32, 768, 2304, Epilogue::kBias));  // QKV
  // The FFN input: only for the erf GELU, which cuBLASLt would leave to a kernel of its own.
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp16, cc, 128, 768, 3072, Epilogue::kBiasGeluTanh));
  EXPECT_TRUE(SplitKLinearApplies(Precision::kFp16, cc, 64, 768, 3072, Epilogue::kBiasGelu));
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp16, cc, 65, 768, 3072, Epilogue::kBiasGelu));
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp16, cc, 256, 3072, 768, Epilogue::kBias));
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp32, cc, 8, 64, 64, Epilogue::kBias));
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp16, cc, 8, 312, 64, Epilogue::kBias));
  EXPECT_FALSE(SplitKLinearApplies(Precision::kFp16, cc, 8, 128, 96, Epilogue::kBias));
  const SplitKGemmArgs a{nullptr,         8,       312,     nullptr,  nullptr, 64,
                         Epilogue::kBias, nullptr, nullptr, sm_count_};
  EXPECT_FALSE(SplitKLinear(Precision::kFp16, a, Stream{nullptr, false}).ok());
}

}  // namespace
}  // namespace bertrt::cuda
#endif  // BERTRT_HAVE_CUDA

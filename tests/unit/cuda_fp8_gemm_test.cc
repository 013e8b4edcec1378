// The FP8 Linear on the GPU: QuantizeToE4M3 rounds as the CPU's emulation
// (core/half.h's FloatToE4M3, which the CPU engine's fp8 GEMMs use), and
// LtGemm::LinearFp8 is the float64 product of its E4M3 operands times their
// scale, plus bias, epilogue and residual, to one fp16/bf16 rounding of the
// output and fp32 accumulation: at BERT-base's and MiniLM's widths, row
// counts off the kernels' tiles, each epilogue.
#if BERTRT_HAVE_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "backends/cuda/gemm/bias_gelu_gemm.h"
#include "backends/cuda/gemm/epilogue.h"
#include "backends/cuda/gemm/gemm.h"
#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/ops/layernorm.h"
#include "core/half.h"
#include "cuda_test_util.h"

namespace bertrt::cuda {
namespace {

using test_util::DeviceBuffer;
using test_util::FromBits;

using Matrix = test_util::RoundedMatrix;
constexpr auto Random = test_util::RandomRounded;

class CudaFp8GemmTest : public test_util::GpuTest {
 protected:
  void SetUp() override {
    test_util::GpuTest::SetUp();
    if (IsSkipped()) return;
    if (gpu_.compute_capability < 89) GTEST_SKIP() << "FP8 tensor cores need sm_89 or newer";
  }
};

// Every E4M3 code's neighbourhood and saturating values, in fp16 and bf16.
TEST_F(CudaFp8GemmTest, QuantizeRoundsAsTheCpuEmulation) {
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    std::mt19937 rng(3);
    Matrix x = Random(65536, 40.0f, p, rng);
    for (float v : {500.0f, -1e4f, 464.0f, 0.0f, -0.0f, 1e-5f})
      x.bits.push_back(test_util::ToBits(v, p)), x.val.push_back(FromBits(x.bits.back(), p));
    const float scale = 0.37f;
    DeviceBuffer dx(x.bits.size() * 2), dq(x.bits.size());
    cudaMemcpy(dx.ptr, x.bits.data(), x.bits.size() * 2, cudaMemcpyHostToDevice);
    ASSERT_TRUE(QuantizeToE4M3(p, dx.ptr, scale, dq.ptr, x.bits.size(), {nullptr, false}).ok());
    std::vector<uint8_t> q(x.bits.size());
    cudaMemcpy(q.data(), dq.ptr, q.size(), cudaMemcpyDeviceToHost);
    const float inverse = 1.0f / scale;
    for (size_t i = 0; i < q.size(); ++i)
      ASSERT_EQ(q[i], FloatToE4M3(static_cast<float>(x.val[i]) * inverse))
          << PrecisionName(p) << " value " << x.val[i];
  }
}

// The vectorized pass without an activation rounds as QuantizeToE4M3, 16
// bytes at a time and, off that alignment, one element at a time.
TEST_F(CudaFp8GemmTest, VectorizedQuantizationRoundsAsTheCpuEmulation) {
  std::mt19937 rng(5);
  for (Precision p : {Precision::kFp16, Precision::kBf16})
    for (size_t offset : {0, 1}) {
      const Matrix x = Random(4099, 40.0f, p, rng);
      DeviceBuffer dx(x.bits.size() * 2), dq(x.bits.size());
      cudaMemcpy(dx.ptr, x.bits.data(), x.bits.size() * 2, cudaMemcpyHostToDevice);
      const size_t n = x.bits.size() - offset;
      ASSERT_TRUE(ActivateToE4M3(p, std::nullopt, static_cast<uint16_t*>(dx.ptr) + offset, 0.5f,
                                 static_cast<uint8_t*>(dq.ptr) + offset, n, {nullptr, false})
                      .ok());
      std::vector<uint8_t> q(x.bits.size());
      cudaMemcpy(q.data(), dq.ptr, q.size(), cudaMemcpyDeviceToHost);
      for (size_t i = offset; i < q.size(); ++i)
        ASSERT_EQ(q[i], FloatToE4M3(static_cast<float>(x.val[i]) * 2.0f))
            << PrecisionName(p) << " offset " << offset << " element " << i;
    }
}

// The activation's pass that also makes the next FP8 GEMM's input gives the
// bytes of the activation kernel and the quantization after it.
TEST_F(CudaFp8GemmTest, ActivateToE4M3IsTheActivationThenTheQuantization) {
  for (Precision p : {Precision::kFp16, Precision::kBf16})
    for (HiddenAct act : {HiddenAct::kGelu, HiddenAct::kGeluTanh, HiddenAct::kRelu}) {
      std::mt19937 rng(11);
      const Matrix x = Random(3 * 3072 + 5, 6.0f, p, rng);  // a tail past the 16-byte vectors
      const size_t n = x.bits.size();
      const float scale = 5.0f / 448.0f;
      DeviceBuffer dx(n * 2), dq(n), fused(n);
      cudaMemcpy(dx.ptr, x.bits.data(), n * 2, cudaMemcpyHostToDevice);
      ASSERT_TRUE(ActivateToE4M3(p, act, dx.ptr, scale, fused.ptr, n, {nullptr, false}).ok());
      ASSERT_TRUE(ActivationInPlace(p, act, dx.ptr, n, {nullptr, false}).ok());
      ASSERT_TRUE(QuantizeToE4M3(p, dx.ptr, scale, dq.ptr, n, {nullptr, false}).ok());
      std::vector<uint8_t> want(n), got(n);
      cudaMemcpy(want.data(), dq.ptr, n, cudaMemcpyDeviceToHost);
      cudaMemcpy(got.data(), fused.ptr, n, cudaMemcpyDeviceToHost);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      size_t differ = 0;
      for (size_t i = 0; i < n; ++i) differ += got[i] != want[i];
      EXPECT_EQ(differ, 0u) << PrecisionName(p) << " activation " << static_cast<int>(act);
      // And the activation ran: GELU and ReLU move negative inputs.
      EXPECT_NE(got, std::vector<uint8_t>(n)) << "all zero";
    }
}

// A LayerNorm that also writes the next FP8 GEMM's input: the bytes
// QuantizeToE4M3 makes of its output, and that output unchanged, on the
// warp path (768: one row a warp, and two from 8,192 rows) and off it (384:
// the quantization as a pass after).
TEST_F(CudaFp8GemmTest, LayerNormWritesTheQuantizationOfItsOutput) {
  for (Precision p : {Precision::kFp16, Precision::kBf16})
    for (int hidden : {768, 384})
      for (int rows : {5, 9000}) {
        std::mt19937 rng(17);
        const Matrix x = Random(size_t(rows) * hidden, 8.0f, p, rng);
        std::vector<float> gamma(hidden), beta(hidden);
        std::normal_distribution<float> d(0.0f, 1.0f);
        for (int i = 0; i < hidden; ++i) gamma[i] = 1.0f + 0.3f * d(rng), beta[i] = 0.2f * d(rng);
        const size_t n = x.bits.size();
        DeviceBuffer dx(n * 2), plain(n * 2), out(n * 2), bytes(n), want(n),
            dg(hidden * sizeof(float)), db(hidden * sizeof(float));
        cudaMemcpy(dx.ptr, x.bits.data(), n * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(dg.ptr, gamma.data(), hidden * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpy(db.ptr, beta.data(), hidden * sizeof(float), cudaMemcpyHostToDevice);
        const auto* g = static_cast<const float*>(dg.ptr);
        const auto* b = static_cast<const float*>(db.ptr);
        const float scale = 6.0f / 448.0f;
        ASSERT_TRUE(LayerNorm(p, dx.ptr, plain.ptr, rows, hidden, g, b, 1e-12f, {nullptr, false})
                        .ok());
        ASSERT_TRUE(LayerNorm(p, dx.ptr, out.ptr, rows, hidden, g, b, 1e-12f, {nullptr, false},
                              {bytes.ptr, scale})
                        .ok());
        ASSERT_TRUE(QuantizeToE4M3(p, plain.ptr, scale, want.ptr, n, {nullptr, false}).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint16_t> y0(n), y1(n);
        std::vector<uint8_t> q0(n), q1(n);
        cudaMemcpy(y0.data(), plain.ptr, n * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(y1.data(), out.ptr, n * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(q0.data(), want.ptr, n, cudaMemcpyDeviceToHost);
        cudaMemcpy(q1.data(), bytes.ptr, n, cudaMemcpyDeviceToHost);
        const std::string what = std::string(PrecisionName(p)) + " " + std::to_string(rows) +
                                 " x " + std::to_string(hidden);
        EXPECT_EQ(y1, y0) << what;
        EXPECT_EQ(q1, q0) << what;
        EXPECT_NE(q1, std::vector<uint8_t>(n)) << what << ": all zero";
      }
}

TEST_F(CudaFp8GemmTest, LinearIsItsE4M3OperandsProduct) {
  struct Shape {
    int rows, in, out;
  };
  const Shape shapes[] = {{1, 768, 2304}, {77, 768, 768}, {300, 768, 3072}, {333, 3072, 768},
                          {129, 384, 1536}};
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    LtGemm gemm;
    ASSERT_TRUE(gemm.Init(p, kGemmWorkspaceBytes, gpu_.name, false).ok());
    std::mt19937 rng(7);
    for (const Shape& s : shapes)
      for (Epilogue e : {Epilogue::kBias, Epilogue::kBiasGeluTanh, Epilogue::kBiasRelu}) {
        for (bool residual : {false, true}) {
          if (residual && e != Epilogue::kBias) continue;
          // E4M3 operands: codes drawn from the values x and W take.
          const float x_scale = 4.0f / 448.0f, w_scale = 0.2f / 448.0f;
          std::normal_distribution<float> xd(0.0f, 1.0f), wd(0.0f, 1.0f / std::sqrt(s.in));
          std::vector<uint8_t> xq(size_t(s.rows) * s.in), wq(size_t(s.out) * s.in);
          for (uint8_t& c : xq) c = FloatToE4M3(xd(rng) / x_scale);
          for (uint8_t& c : wq) c = FloatToE4M3(wd(rng) / w_scale);
          const Matrix bias = Random(s.out, 0.5f, p, rng);
          const Matrix res = Random(size_t(s.rows) * s.out, 1.0f, p, rng);
          const size_t out_n = size_t(s.rows) * s.out;
          DeviceBuffer dx(xq.size()), dw(wq.size()), db(bias.bits.size() * 2),
              dr(res.bits.size() * 2), dy(out_n * 2);
          cudaMemcpy(dx.ptr, xq.data(), xq.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(dw.ptr, wq.data(), wq.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(db.ptr, bias.bits.data(), bias.bits.size() * 2, cudaMemcpyHostToDevice);
          cudaMemcpy(dr.ptr, res.bits.data(), res.bits.size() * 2, cudaMemcpyHostToDevice);
          cudaMemset(dy.ptr, 0xff, out_n * 2);  // NaN where nothing is written
          const Status st = gemm.LinearFp8(dx.ptr, s.rows, s.in, dw.ptr, x_scale * w_scale,
                                           db.ptr, s.out, e, residual ? dr.ptr : nullptr, dy.ptr,
                                           nullptr);
          ASSERT_TRUE(st.ok()) << st.ToString();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<uint16_t> y(out_n);
          cudaMemcpy(y.data(), dy.ptr, out_n * 2, cudaMemcpyDeviceToHost);
          double worst = 0;
          const int block = std::min(s.rows, 24);
          for (int first : {0, s.rows / 2, s.rows - block})
            for (int r = std::max(0, first); r < std::min(s.rows, first + block); ++r)
              for (int c = 0; c < s.out; ++c) {
                double v = 0;
                for (int k = 0; k < s.in; ++k)
                  v += double{E4M3ToFloat(xq[size_t(r) * s.in + k])} *
                       E4M3ToFloat(wq[size_t(c) * s.in + k]);
                v = v * (double{x_scale} * w_scale) + bias.val[c];
                if (e == Epilogue::kBiasGeluTanh)
                  v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
                if (e == Epilogue::kBiasRelu) v = std::max(v, 0.0);
                if (residual) v += res.val[size_t(r) * s.out + c];
                const double got = FromBits(y[size_t(r) * s.out + c], p);
                // One rounding of the output (fp16: 2^-11, bf16: 2^-8
                // relative) plus fp32 accumulation over `in` exact products;
                // the tanh GELU's own approximation in cuBLASLt.
                const double bound = (p == Precision::kFp16 ? 1e-3 : 8e-3) * std::abs(v) + 2e-3;
                worst =
                    std::max(worst, std::isfinite(got) ? std::abs(got - v) / bound : INFINITY);
              }
          EXPECT_LE(worst, 1.0) << PrecisionName(p) << " " << s.rows << " x " << s.in << " -> "
                                << s.out << " epilogue " << int(e) << " residual " << residual;
        }
      }
  }
}

TEST_F(CudaFp8GemmTest, RefusesWhatFp8GemmsCannotTake) {
  LtGemm gemm;
  ASSERT_TRUE(gemm.Init(Precision::kFp16, kGemmWorkspaceBytes, gpu_.name, false).ok());
  DeviceBuffer buf(1 << 16);
  EXPECT_FALSE(
      gemm.LinearFp8(buf.ptr, 4, 100, buf.ptr, 1.0f, buf.ptr, 8, Epilogue::kBias, nullptr,
                     buf.ptr, nullptr)
          .ok())
      << "an input width that is not a multiple of 16";
  EXPECT_FALSE(gemm.LinearFp8(buf.ptr, 4, 64, buf.ptr, 1.0f, buf.ptr, 37, Epilogue::kBias,
                              nullptr, buf.ptr, nullptr)
                   .ok())
      << "an output width that is not a multiple of 16";
  EXPECT_FALSE(gemm.LinearFp8(buf.ptr, 4, 64, buf.ptr, 0.0f, buf.ptr, 8, Epilogue::kBias,
                              nullptr, buf.ptr, nullptr)
                   .ok());
  LtGemm fp32;
  ASSERT_TRUE(fp32.Init(Precision::kFp32, kGemmWorkspaceBytes, gpu_.name, false).ok());
  EXPECT_FALSE(fp32.LinearFp8(buf.ptr, 4, 64, buf.ptr, 1.0f, buf.ptr, 8, Epilogue::kBias,
                              nullptr, buf.ptr, nullptr)
                   .ok());
}

}  // namespace
}  // namespace bertrt::cuda
#endif  // BERTRT_HAVE_CUDA

// The FFN's first GEMM with the erf GELU (Epilogue::kBiasGelu) through
// LinearLayers::Run, against a float64 reference on the host: below
// kFusedGeluMinRows (cuBLASLt, then the activation kernel) and above it
// (bias_gelu_gemm.h's fused kernel on sm_90), at BERT-base's, BERT-large's
// and MiniLM's widths and row counts off the kernel's 128-row tiles, fp16
// and bf16. The reference is computed for the first, a middle and the last
// 48 rows (the whole product would take the host minutes).
#if BERTRT_HAVE_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cuda/gemm/bias_gelu_gemm.h"
#include "backends/cuda/gemm/linear.h"
#include "backends/cuda/ops/attention.h"
#include "cuda_test_util.h"

namespace bertrt::cuda {
namespace {

using test_util::DeviceBuffer;
using test_util::FromBits;

using Matrix = test_util::RoundedMatrix;
constexpr auto Random = test_util::RandomRounded;

class CudaErfGeluLinearTest : public test_util::GpuTest {};

TEST_F(CudaErfGeluLinearTest, MatchesAFloat64Reference) {
  struct Shape {
    int rows, in, out;
  };
  // 1,000 rows: cuBLASLt + kernel; the others the fused kernel on sm_90.
  const Shape shapes[] = {
      {1000, 768, 3072}, {2500, 768, 3072}, {4097, 1024, 4096}, {3001, 384, 1536}};
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    LtGemm gemm;
    ASSERT_TRUE(gemm.Init(p, kGemmWorkspaceBytes, gpu_.name, false).ok());
    const LinearLayers linear(gemm, p, gpu_.compute_capability, sm_count_, false, true, false);
    std::mt19937 rng(5);
    for (const Shape& s : shapes) {
      const Matrix x = Random(size_t(s.rows) * s.in, 1.0f, p, rng);
      const Matrix w = Random(size_t(s.out) * s.in, 1.0f / std::sqrt(s.in), p, rng);
      const Matrix bias = Random(s.out, 0.5f, p, rng);
      const size_t out_n = size_t(s.rows) * s.out;
      DeviceBuffer dx(x.bits.size() * 2), dw(w.bits.size() * 2), db(bias.bits.size() * 2),
          dy(out_n * 2);
      cudaMemcpy(dx.ptr, x.bits.data(), x.bits.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dw.ptr, w.bits.data(), w.bits.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(db.ptr, bias.bits.data(), bias.bits.size() * 2, cudaMemcpyHostToDevice);
      cudaMemset(dy.ptr, 0xff, out_n * 2);  // NaN where nothing is written
      const Status st = linear.Run(dx.ptr, s.rows, s.in, dw.ptr, db.ptr, s.out, Epilogue::kBiasGelu,
                                   nullptr, dy.ptr, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> y(out_n);
      cudaMemcpy(y.data(), dy.ptr, out_n * 2, cudaMemcpyDeviceToHost);
      double worst = 0;
      const int block = 48;
      for (int first : {0, s.rows / 2, s.rows - block})
        for (int r = first; r < first + block; ++r)
          for (int c = 0; c < s.out; ++c) {
            double v = bias.val[c];
            for (int k = 0; k < s.in; ++k)
              v += x.val[size_t(r) * s.in + k] * w.val[size_t(c) * s.in + k];
            const double want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
            const double got = FromBits(y[size_t(r) * s.out + c], p);
            // One rounding of the output (fp16: 2^-11, bf16: 2^-8 relative)
            // plus fp32 accumulation over `in` terms.
            const double bound = (p == Precision::kFp16 ? 1e-3 : 8e-3) * std::abs(want) + 1e-3;
            worst = std::max(worst, std::isfinite(got) ? std::abs(got - want) / bound : INFINITY);
          }
      EXPECT_LE(worst, 1.0) << PrecisionName(p) << " " << s.rows << " x " << s.in << " -> "
                            << s.out;
    }
  }
}

TEST_F(CudaErfGeluLinearTest, RunsFusedOnHopperWhereBuilt) {
  // A build with sm_90a and CUTLASS must take the fused kernel on an sm_90
  // GPU: otherwise the erf GELU costs a pass over the intermediate.
  if (gpu_.compute_capability != 90) GTEST_SKIP() << "not an sm_90 GPU";
  EXPECT_EQ(BiasGeluGemmApplies(Precision::kFp16, 90, 768, 3072), BiasGeluGemmBuilt());
  if (WgmmaAttentionBuilt())  // a build with sm_90a
    EXPECT_TRUE(BiasGeluGemmBuilt()) << "an sm_90a build without CUTLASS's headers "
                                        "(scripts/fetch_cutlass.sh)";
  EXPECT_FALSE(BiasGeluGemmApplies(Precision::kFp32, 90, 768, 3072));
  EXPECT_FALSE(BiasGeluGemmApplies(Precision::kFp16, 80, 768, 3072));
  EXPECT_FALSE(BiasGeluGemmApplies(Precision::kFp16, 90, 764, 3072));
}

}  // namespace
}  // namespace bertrt::cuda
#endif  // BERTRT_HAVE_CUDA

// The int8 GEMM's input rows on the GPU: QuantizeRowsToUint8 makes the
// bytes, scales and zero points the CPU engine's Int8Gemm makes of the same
// fp16 rows (its formula, written out here on the host in the same float
// operations), per token and per tensor, at every width the one-pass kernel
// holds in registers; and a LayerNorm that also writes that input makes the
// same ones as the pass over its output, on its one-warp-a-row path (768,
// 1024; two rows a warp from 8,192 rows) and off it (384: the pass after).
#if BERTRT_HAVE_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/ops/layernorm.h"
#include "cuda_test_util.h"

namespace bertrt::cuda {
namespace {

using test_util::DeviceBuffer;

// Rows quantized for the int8 GEMM, read back.
struct Uint8Rows {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<int32_t> zeros;
};

// The CPU engine's quantization of fp16 rows (values `x`) with multipliers
// `mult`: per token (input_scale 0) the row's range over x * mult and 0 onto
// 0..255; per tensor (mult holding 1 / input_scale) x * mult rounded onto
// [-127, 127], plus 128.
Uint8Rows HostQuantize(const std::vector<double>& x, int rows, int width,
                       const std::vector<float>& mult, float input_scale) {
  Uint8Rows q{std::vector<uint8_t>(x.size()), std::vector<float>(rows),
              std::vector<int32_t>(rows)};
  for (int r = 0; r < rows; ++r) {
    std::vector<float> v(width);
    float lo = 0.0f, hi = 0.0f;
    for (int k = 0; k < width; ++k) {
      v[k] = static_cast<float>(x[size_t(r) * width + k]) * mult[k];
      lo = std::min(lo, v[k]), hi = std::max(hi, v[k]);
    }
    const bool per_token = input_scale == 0.0f;
    float scale = input_scale, inverse = 1.0f, zero = 128.0f;
    if (per_token) {
      scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
      inverse = 1.0f / scale;
      zero = std::nearbyint(-lo * inverse);
    }
    for (int k = 0; k < width; ++k) {
      const float f = std::nearbyint(v[k] * inverse);
      q.bytes[size_t(r) * width + k] = static_cast<uint8_t>(
          per_token ? std::clamp(f + zero, 0.0f, 255.0f) : std::clamp(f, -127.0f, 127.0f) + 128);
    }
    q.scales[r] = scale, q.zeros[r] = static_cast<int32_t>(zero);
  }
  return q;
}

// Device rows of `n` bytes and their `rows` scales and zero points.
struct DeviceUint8Rows {
  DeviceBuffer bytes, scales, zeros;
  DeviceUint8Rows(size_t n, int rows) : bytes(n), scales(rows * 4), zeros(rows * 4) {}
  Uint8Rows Read(size_t n, int rows) const {
    Uint8Rows q{std::vector<uint8_t>(n), std::vector<float>(rows), std::vector<int32_t>(rows)};
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(q.bytes.data(), bytes.ptr, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(q.scales.data(), scales.ptr, rows * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(q.zeros.data(), zeros.ptr, rows * 4, cudaMemcpyDeviceToHost);
    return q;
  }
  float* row_scales() const { return static_cast<float*>(scales.ptr); }
  int32_t* row_zeros() const { return static_cast<int32_t*>(zeros.ptr); }
};

void ExpectSame(const Uint8Rows& got, const Uint8Rows& want, const std::string& what) {
  size_t differ = 0;
  for (size_t i = 0; i < want.bytes.size(); ++i) differ += got.bytes[i] != want.bytes[i];
  EXPECT_EQ(differ, 0u) << what << ": bytes";
  EXPECT_EQ(got.scales, want.scales) << what << ": scales";
  EXPECT_EQ(got.zeros, want.zeros) << what << ": zero points";
  EXPECT_NE(got.bytes, std::vector<uint8_t>(got.bytes.size(), got.bytes[0])) << what << ": flat";
}

// Multipliers as SmoothQuant's divisors make them (one outlier column
// divided down), times 1 / input_scale per tensor.
std::vector<float> Multipliers(int width, float input_scale) {
  std::vector<float> mult(width, 1.0f);
  mult[5] = 0.25f;
  if (input_scale != 0.0f)
    for (float& m : mult) m /= input_scale;
  return mult;
}

// A device copy of `v`'s elements.
struct Uploaded : DeviceBuffer {
  template <typename T>
  explicit Uploaded(const std::vector<T>& v) : DeviceBuffer(v.size() * sizeof(T)) {
    EXPECT_EQ(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
};

class CudaInt8InputTest : public test_util::GpuTest {};

// Rows with an outlier column, a row of zeros (scale 1), a row of one sign
// (0 inside its range), at widths 384 to 4,096 (each register count of the
// kernel) and off the block's 4 rows.
TEST_F(CudaInt8InputTest, QuantizeRowsMakesTheCpuEnginesRows) {
  for (int width : {384, 768, 1024, 3072, 4096}) {
    const int rows = 37;
    std::mt19937 rng(width);
    test_util::RoundedMatrix x = test_util::RandomRounded(size_t(rows) * width, 2.0f,
                                                          Precision::kFp16, rng);
    for (int r = 0; r < rows; ++r) {
      auto set = [&](int k, float v) {
        const size_t i = size_t(r) * width + k;
        x.bits[i] = test_util::ToBits(v, Precision::kFp16);
        x.val[i] = test_util::FromBits(x.bits[i], Precision::kFp16);
      };
      set(5, static_cast<float>(x.val[size_t(r) * width + 5]) * 20);
      for (int k = 0; k < width; ++k) {
        const float v = static_cast<float>(x.val[size_t(r) * width + k]);
        if (r == 0) set(k, 0.0f);
        if (r == 1) set(k, std::abs(v) + 0.5f);
      }
    }
    const Uploaded dx(x.bits);
    for (float input_scale : {0.0f, 3.0f / 127}) {
      const std::vector<float> mult = Multipliers(width, input_scale);
      const Uploaded dm(mult);
      DeviceUint8Rows q(x.bits.size(), rows);
      ASSERT_TRUE(QuantizeRowsToUint8(Precision::kFp16, dx.ptr, rows, width,
                                      static_cast<const float*>(dm.ptr), input_scale, q.bytes.ptr,
                                      q.row_scales(), q.row_zeros(), {nullptr, false})
                      .ok());
      ExpectSame(q.Read(x.bits.size(), rows), HostQuantize(x.val, rows, width, mult, input_scale),
                 std::to_string(width) + (input_scale == 0 ? " per token" : " per tensor"));
    }
  }
  // Wider rows than the kernel holds: refused, not misquantized.
  DeviceUint8Rows q(4112, 1);
  DeviceBuffer dx(4112 * 2), dm(4112 * 4);
  EXPECT_FALSE(QuantizeRowsToUint8(Precision::kFp16, dx.ptr, 1, 4112,
                                   static_cast<const float*>(dm.ptr), 0.0f, q.bytes.ptr,
                                   q.row_scales(), q.row_zeros(), {nullptr, false})
                   .ok());
}

TEST_F(CudaInt8InputTest, LayerNormWritesTheUint8RowsOfItsOutput) {
  for (int hidden : {768, 1024, 384})
    for (int rows : {5, 9000})
      for (float input_scale : {0.0f, 4.0f / 127}) {
        std::mt19937 rng(hidden + rows);
        const test_util::RoundedMatrix x =
            test_util::RandomRounded(size_t(rows) * hidden, 8.0f, Precision::kFp16, rng);
        std::vector<float> gamma(hidden), beta(hidden);
        std::normal_distribution<float> d(0.0f, 1.0f);
        for (int i = 0; i < hidden; ++i) gamma[i] = 1.0f + 0.3f * d(rng), beta[i] = 0.2f * d(rng);
        gamma[5] = 12.0f;  // an outlier column, as trained LayerNorms have
        const std::vector<float> mult = Multipliers(hidden, input_scale);
        const size_t n = x.bits.size();
        const Uploaded dx(x.bits), dg(gamma), db(beta), dm(mult);
        DeviceBuffer plain(n * 2), out(n * 2);
        DeviceUint8Rows fused(n, rows), pass(n, rows);
        const auto* g = static_cast<const float*>(dg.ptr);
        const auto* b = static_cast<const float*>(db.ptr);
        const auto* m = static_cast<const float*>(dm.ptr);
        const Stream stream{nullptr, false};
        ASSERT_TRUE(LayerNorm(Precision::kFp16, dx.ptr, plain.ptr, rows, hidden, g, b, 1e-12f,
                              stream)
                        .ok());
        ASSERT_TRUE(LayerNorm(Precision::kFp16, dx.ptr, out.ptr, rows, hidden, g, b, 1e-12f,
                              stream, {},
                              {fused.bytes.ptr, m, input_scale, fused.row_scales(),
                               fused.row_zeros()})
                        .ok());
        ASSERT_TRUE(QuantizeRowsToUint8(Precision::kFp16, plain.ptr, rows, hidden, m, input_scale,
                                        pass.bytes.ptr, pass.row_scales(), pass.row_zeros(),
                                        stream)
                        .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint16_t> y0(n), y1(n);
        cudaMemcpy(y0.data(), plain.ptr, n * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(y1.data(), out.ptr, n * 2, cudaMemcpyDeviceToHost);
        const std::string what = std::to_string(rows) + " x " + std::to_string(hidden) +
                                 (input_scale == 0 ? " per token" : " per tensor");
        EXPECT_EQ(y1, y0) << what << ": the LayerNorm's own output changed";
        ExpectSame(fused.Read(n, rows), pass.Read(n, rows), what);
      }
  // Only from fp16 (the int8 engine's activations), and never beside E4M3.
  DeviceBuffer buf(768 * 4), bytes(768), scales(4), zeros(4), ones(768 * 4);
  const Uint8Output u8{bytes.ptr, static_cast<const float*>(ones.ptr), 0.0f,
                       static_cast<float*>(scales.ptr), static_cast<int32_t*>(zeros.ptr)};
  const auto* f = static_cast<const float*>(ones.ptr);
  EXPECT_FALSE(
      LayerNorm(Precision::kBf16, buf.ptr, buf.ptr, 1, 768, f, f, 1e-12f, {nullptr, false}, {}, u8)
          .ok());
  EXPECT_FALSE(LayerNorm(Precision::kFp16, buf.ptr, buf.ptr, 1, 768, f, f, 1e-12f,
                         {nullptr, false}, {bytes.ptr, 1.0f}, u8)
                   .ok());
}

}  // namespace
}  // namespace bertrt::cuda
#endif

// Helpers of the CUDA kernel tests: a fixture on the first GPU, a device
// buffer, and 16-bit float bits to and from float on the host.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "bertrt/cuda_engine.h"
#include "bertrt/devices.h"

namespace bertrt::cuda::test_util {

// Runs its tests on the first GPU; skips them where there is none.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpus = ListGpus();
    if (!gpus.ok() || gpus->empty()) GTEST_SKIP() << "no usable GPU";
    gpu_ = (*gpus)[0];
    cudaSetDevice(gpu_.index);
    cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, gpu_.index);
  }
  GpuInfo gpu_;
  int sm_count_ = 0;
};

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// x rounded to fp16 or bf16 (p), as bits.
inline uint16_t ToBits(float x, Precision p) {
  uint16_t bits;
  if (p == Precision::kFp16) {
    const __half h = __float2half_rn(x);
    std::memcpy(&bits, &h, 2);
  } else {
    const __nv_bfloat16 b = __float2bfloat16_rn(x);
    std::memcpy(&bits, &b, 2);
  }
  return bits;
}

inline float FromBits(uint16_t bits, Precision p) {
  if (p == Precision::kFp16) {
    __half h;
    std::memcpy(&h, &bits, 2);
    return __half2float(h);
  }
  __nv_bfloat16 b;
  std::memcpy(&b, &bits, 2);
  return __bfloat162float(b);
}

// Normal random values rounded to precision p: their bits, and the values
// the bits hold exactly (what a float64 reference multiplies).
struct RoundedMatrix {
  std::vector<uint16_t> bits;
  std::vector<double> val;
};

inline RoundedMatrix RandomRounded(size_t n, float scale, Precision p, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, scale);
  RoundedMatrix m{std::vector<uint16_t>(n), std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) m.val[i] = FromBits(m.bits[i] = ToBits(dist(rng), p), p);
  return m;
}

}  // namespace bertrt::cuda::test_util

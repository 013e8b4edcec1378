// Probe (not part of the build): the int8 engine's GEMM (gemm/sm90/int8_gemm.cuh)
// in several tilings at BERT-base's four GEMMs (batch 128 x 128 = 16,384 rows)
// and BERT-large's FFN (98,304 rows), against cuBLASLt's fp16 GEMM of the same
// shape (the speed to beat; its bias epilogue, GELU as tanh for FFN-in, the
// residual as C). Each tiling's output is compared with a plain kernel that
// computes the same formula (int32 sums, the same float epilogue): they must
// agree bit for bit but for the erf GELU's ulp (max |diff| printed).
// CUDA graph of 20 runs, us; TFLOP/s counts 2 per multiply-add.
//   nvcc -O3 -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DNDEBUG -I include -I src \
//     -I third_party/cutlass-4.2.0.0/include -I third_party/cutlass-4.2.0.0/tools/util/include \
//     bench/probes/int8_gemm_probe.cu -lcublasLt -o int8_gemm_probe
// Results: bench/RESULTS.md.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../../src/core/status.cc"
#include "backends/cuda/gemm/sm90/int8_gemm.cuh"
#include "probe_util.h"

namespace bertrt::cuda {
bool Int8GemmBuilt() { return true; }
}  // namespace bertrt::cuda

namespace probe {

using namespace cute;
using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpi = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingEpi = cutlass::epilogue::TmaWarpSpecialized;
template <class Tile, class Cluster, class Schedule, class Epi, bool kResidual>
using K = bertrt::cuda::sm90::Int8GemmKernel<cutlass::half_t, Tile, Cluster, Schedule, Epi,
                                              kResidual>;
using C1 = Shape<_1, _1, _1>;
using C2x1 = Shape<_2, _1, _1>;
using C1x2 = Shape<_1, _2, _1>;

// The int8 GEMM's formula, one thread an output (int8_gemm.h).
__global__ void Reference(bertrt::cuda::Int8GemmArgs a) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(a.rows) * a.out) return;
  const int r = int(i / a.out), o = int(i % a.out);
  int32_t acc = 0;
  for (int k = 0; k < a.in; ++k)
    acc += int32_t(a.x[size_t(r) * a.in + k]) * int32_t(a.w[size_t(o) * a.in + k]);
  const float centered = float(int32_t(uint32_t(acc) - uint32_t(a.row_zeros[r]) *
                                                            uint32_t(a.weight_sums[o])));
  const float bias = __half2float(static_cast<const __half*>(a.bias)[o]);
  float v = fmaf(centered * a.weight_scales[o], a.row_scales[r], bias);
  if (a.residual) {
    v += __half2float(static_cast<const __half*>(a.residual)[i]);
  } else {
    v = __half2float(__float2half_rn(v));
    if (a.gelu) v = bertrt::cuda::ErfGelu(v);
  }
  static_cast<__half*>(a.y)[i] = __float2half_rn(v);
}

template <class T>
T* Upload(const std::vector<T>& h) {
  T* d = nullptr;
  CK(cudaMalloc(&d, h.size() * sizeof(T)));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

float MaxDiff(const void* a, const void* b, size_t n) {
  std::vector<__half> x(n), y(n);
  CK(cudaMemcpy(x.data(), a, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(y.data(), b, n * 2, cudaMemcpyDeviceToHost));
  float m = 0;
  for (size_t i = 0; i < n; ++i)
    m = std::max(m, std::abs(__half2float(x[i]) - __half2float(y[i])));
  return m;
}

// Times each tiling (`row` prints it).
template <bool kRes, class Row>
void Ways(Row& row) {
  row("128x128x128 pingpong 1x2 (engine)",
      K<Shape<_128, _128, _128>, C1x2, Ping, PingEpi, kRes>::Run);
  row("128x128x128 pingpong 1x1", K<Shape<_128, _128, _128>, C1, Ping, PingEpi, kRes>::Run);
  row("128x128x64 pingpong 1x2", K<Shape<_128, _128, _64>, C1x2, Ping, PingEpi, kRes>::Run);
  row("256x128x128 coop 2x1", K<Shape<_256, _128, _128>, C2x1, Coop, CoopEpi, kRes>::Run);
  row("128x256x128 coop 1x2", K<Shape<_128, _256, _128>, C1x2, Coop, CoopEpi, kRes>::Run);
  row("128x256x64 coop 1x1", K<Shape<_128, _256, _64>, C1, Coop, CoopEpi, kRes>::Run);
}

}  // namespace probe
using namespace probe;

int main() {
  constexpr int kReps = 20;
  ProbeContext p;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::mt19937 rng(7);
  struct Case {
    const char* name;
    int rows, in, out;
    bool residual, gelu;
  };
  const Case cases[] = {{"base qkv", 16384, 768, 2304, false, false},
                        {"base attn_out", 16384, 768, 768, true, false},
                        {"base ffn_in", 16384, 768, 3072, false, true},
                        {"base ffn_out", 16384, 3072, 768, true, false},
                        {"large ffn_in", 98304, 1024, 4096, false, true}};
  std::printf("| GEMM | rows | in -> out | way | us | TFLOP/s | vs fp16 | max diff |\n");
  std::printf("|---|---:|---|---|---:|---:|---:|---:|\n");
  for (const Case& c : cases) {
    const size_t n = size_t(c.rows) * c.out;
    std::uniform_int_distribution<int> byte(0, 255), weight(-127, 127);
    std::vector<uint8_t> x(size_t(c.rows) * c.in);
    std::vector<int8_t> w(size_t(c.out) * c.in);
    for (auto& v : x) v = uint8_t(byte(rng));
    for (auto& v : w) v = int8_t(weight(rng));
    std::vector<float> row_scales(c.rows), weight_scales(c.out);
    std::vector<int32_t> row_zeros(c.rows), weight_sums(c.out, 0);
    std::vector<__half> bias(c.out), residual(n);
    for (int r = 0; r < c.rows; ++r)
      row_scales[r] = 0.01f + 0.001f * (r % 7), row_zeros[r] = r % 256;
    for (int o = 0; o < c.out; ++o) {
      weight_scales[o] = 1e-4f * (1 + o % 5);
      for (int k = 0; k < c.in; ++k) weight_sums[o] += w[size_t(o) * c.in + k];
      bias[o] = __float2half(0.01f * (o % 11) - 0.05f);
    }
    for (size_t i = 0; i < n; ++i) residual[i] = __float2half(0.001f * (i % 97));
    void *y = nullptr, *want = nullptr;
    CK(cudaMalloc(&y, n * 2));
    CK(cudaMalloc(&want, n * 2));
    bertrt::cuda::Int8GemmArgs a{Upload(x),           Upload(row_scales), Upload(row_zeros),
                                 c.rows,              c.in,               Upload(w),
                                 Upload(weight_scales), Upload(weight_sums), Upload(bias),
                                 c.out,               c.residual ? Upload(residual) : nullptr,
                                 c.gelu,              want,               sms};
    Reference<<<unsigned((n + 255) / 256), 256>>>(a);
    CK(cudaDeviceSynchronize());
    a.y = y;
    const double flop = 2.0 * c.rows * c.in * c.out;
    // cuBLASLt fp16 at this shape (column-major view: m = out, n = rows).
    GemmShape shape{c.name, c.out, c.rows, c.in,
                    c.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS, c.residual};
    LtGemmCase lt(shape, 1);
    const auto algo = lt.Heuristic(p.lt, 1, p.kWorkspaceBytes).at(0).algo;
    const float fp16_us = p.GraphUs(
        kReps, [&](int) { CK(lt.Run(p.lt, algo, 0, p.ws, p.kWorkspaceBytes, p.s)); });
    std::printf("| %s | %d | %d -> %d | cuBLASLt fp16 | %.1f | %.0f | 1.00 | |\n", c.name, c.rows,
                c.in, c.out, fp16_us, flop / fp16_us * 1e-6);
    auto row = [&](const char* way, auto run) {
      CK(cudaMemset(y, 0, n * 2));
      const float us = p.GraphUs(kReps, [&](int) {
        const bertrt::Status st = run(a, p.s);
        if (!st.ok()) std::printf("%s: %s\n", way, st.message().c_str()), std::exit(1);
      });
      std::printf("| %s | %d | %d -> %d | %s | %.1f | %.0f | %.2f | %.3g |\n", c.name, c.rows,
                  c.in, c.out, way, us, flop / us * 1e-6, fp16_us / us, MaxDiff(y, want, n));
    };
    if (c.residual)
      Ways<true>(row);
    else
      Ways<false>(row);
  }
  return 0;
}

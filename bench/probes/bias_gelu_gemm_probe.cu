// Probe (not part of the build): the FFN's first GEMM with the exact GELU,
// fp16, at BERT-base's, BERT-large's and MiniLM's shapes, three ways:
//   lt+erf    cuBLASLt's bias epilogue, then an erf GELU kernel over the
//             output (what the engine ran before src/backends/cuda/gemm/
//             bias_gelu_gemm.h);
//   lt-tanh   cuBLASLt's GELU epilogue (tanh form: the speed to reach);
//   cutlass   gemm/sm90/bias_gelu_gemm.cuh in each tiling below, with its GeluErf
//             (and, for one tiling, CUTLASS's erff GELU and no activation);
//   lt, no act  cuBLASLt's bias epilogue alone (the GEMM without any GELU).
// Each result is checked against an fp32 reference (a plain kernel) on its
// first and last 64 rows: the largest error and the output's largest value.
// CUDA graph of 20 runs, L2-warm weights, us; ratio = lt+erf time / this one.
//   nvcc -O3 -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DNDEBUG -I include -I src \
//     -I third_party/cutlass-4.2.0.0/include -I third_party/cutlass-4.2.0.0/tools/util/include \
//     bench/probes/bias_gelu_gemm_probe.cu -lcublasLt -o bias_gelu_gemm_probe
// Results (H200): bench/RESULTS.md.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../../src/core/status.cc"
#include "backends/cuda/gemm/sm90/bias_gelu_gemm.cuh"
#include "gelu_gemm_check.cuh"
#include "probe_util.h"

namespace bertrt::cuda {
bool BiasGeluGemmBuilt() { return true; }
}  // namespace bertrt::cuda

// A named namespace: nvcc's kernel stubs cannot tell an anonymous one from
// cute's once `using namespace cute` is in scope.
namespace probe {

using namespace cute;
using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpi = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingEpi = cutlass::epilogue::TmaWarpSpecialized;
using H = cutlass::half_t;
template <class Tile, class Cluster, class Schedule, class Epi,
          template <class> class Act = bertrt::cuda::sm90::GeluErf>
using K = bertrt::cuda::sm90::BiasGeluGemmKernel<H, Tile, Cluster, Schedule, Epi, Act>;
using T128x256 = Shape<_128, _256, _64>;
using T256x128 = Shape<_256, _128, _64>;
using T128x128 = Shape<_128, _128, _64>;
using C1 = Shape<_1, _1, _1>;
using C2x1 = Shape<_2, _1, _1>;
using C1x2 = Shape<_1, _2, _1>;
using cutlass::epilogue::thread::GELU;
using cutlass::epilogue::thread::Identity;

__global__ void ErfGelu(__half* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float v = __half2float(x[i]);
    x[i] = __float2half_rn(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

void FillRandom(void* p, size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> d(0, scale);
  std::vector<__half> h(n);
  for (auto& v : h) v = __float2half(d(rng));
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
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
    const char* model;
    int rows, in, out;
  };
  const Case cases[] = {{"base", 128, 768, 3072},     {"base", 1024, 768, 3072},
                        {"base", 2432, 768, 3072},    {"base", 4096, 768, 3072},
                        {"base", 16384, 768, 3072},   {"large", 16384, 1024, 4096},
                        {"large", 98304, 1024, 4096}, {"minilm", 16384, 384, 1536}};
  std::printf("| model | rows | in -> out | way | us | ratio | TFLOP/s | max err | max |y| |\n");
  std::printf("|---|---:|---|---|---:|---:|---:|---:|---:|\n");
  for (const Case& c : cases) {
    GemmShape bias{"ffn_in", c.out, c.rows, c.in, CUBLASLT_EPILOGUE_BIAS, false};
    GemmShape tanh_shape{"ffn_in", c.out, c.rows, c.in, CUBLASLT_EPILOGUE_GELU_BIAS, false};
    LtGemmCase lt(bias, 1), lt_tanh(tanh_shape, 1);
    // One set of operands for every way: lt's.
    FillRandom(lt.x, size_t(c.rows) * c.in, 1.0f, rng);
    FillRandom(lt.w[0], size_t(c.out) * c.in, 0.04f, rng);
    FillRandom(lt.bias, c.out, 0.1f, rng);
    CK(cudaMemcpy(lt_tanh.x, lt.x, size_t(c.rows) * c.in * 2, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(lt_tanh.w[0], lt.w[0], size_t(c.out) * c.in * 2, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(lt_tanh.bias, lt.bias, c.out * 2, cudaMemcpyDeviceToDevice));
    const auto algo = lt.Heuristic(p.lt, 1, p.kWorkspaceBytes).at(0).algo;
    const auto algo_tanh = lt_tanh.Heuristic(p.lt, 1, p.kWorkspaceBytes).at(0).algo;
    const size_t n = size_t(c.rows) * c.out;
    const double flop = 2.0 * c.rows * c.in * c.out;
    auto row = [&](const char* way, float us, float base_us, const void* y) {
      const auto [err, scale] = CheckGeluGemm(lt.x, lt.w[0], lt.bias, y, c.rows, c.in, c.out);
      std::printf("| %s | %d | %d -> %d | %s | %.2f | %.3f | %.0f | %.2e | %.2f |\n", c.model,
                  c.rows, c.in, c.out, way, us, base_us / us, flop / us * 1e-6, err, scale);
    };
    auto lt_erf = [&](int) {
      CK(lt.Run(p.lt, algo, 0, p.ws, p.kWorkspaceBytes, p.s));
      ErfGelu<<<std::min<size_t>((n + 255) / 256, 4096), 256, 0, p.s>>>(
          static_cast<__half*>(lt.y), n);
    };
    const float base_us = p.GraphUs(kReps, lt_erf);
    row("lt+erf", base_us, base_us, lt.y);
    const float bias_us = p.GraphUs(
        kReps, [&](int) { CK(lt.Run(p.lt, algo, 0, p.ws, p.kWorkspaceBytes, p.s)); });
    std::printf("| %s | %d | %d -> %d | lt, no act | %.2f | %.3f | %.0f | | |\n", c.model, c.rows,
                c.in, c.out, bias_us, base_us / bias_us, flop / bias_us * 1e-6);
    const float tanh_us = p.GraphUs(
        kReps, [&](int) { CK(lt_tanh.Run(p.lt, algo_tanh, 0, p.ws, p.kWorkspaceBytes, p.s)); });
    row("lt-tanh", tanh_us, base_us, lt_tanh.y);
    const bertrt::cuda::BiasGeluGemmArgs a{lt.x, c.rows, c.in, lt.w[0], lt.bias, c.out,
                                           lt_tanh.y, sms};
    auto cutlass_row = [&](const char* way, auto run) {
      CK(cudaMemset(lt_tanh.y, 0, n * 2));
      const float us = p.GraphUs(kReps, [&](int) {
        const bertrt::Status st = run(a, p.s);
        if (!st.ok()) std::printf("%s: %s\n", way, st.message().c_str()), std::exit(1);
      });
      row(way, us, base_us, lt_tanh.y);
    };
    cutlass_row("cutlass 256x128 coop 1x2, erff", K<T256x128, C1x2, Coop, CoopEpi, GELU>::Run);
    cutlass_row("cutlass 256x128 coop 1x2, no act", K<T256x128, C1x2, Coop, CoopEpi, Identity>::Run);
    cutlass_row("cutlass 256x128 coop 1x2", K<T256x128, C1x2, Coop, CoopEpi>::Run);
    cutlass_row("cutlass 128x256 coop 2x1", K<T128x256, C2x1, Coop, CoopEpi>::Run);
    cutlass_row("cutlass 128x128 pingpong", K<T128x128, C1, Ping, PingEpi>::Run);
    cutlass_row("cutlass 128x128 pingpong 1x2", K<T128x128, C1x2, Ping, PingEpi>::Run);
    cutlass_row("cutlass 128x128 pingpong 2x1", K<T128x128, C2x1, Ping, PingEpi>::Run);
  }
  return 0;
}

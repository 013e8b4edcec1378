// Probe (not part of the build): BERT-base's four GEMMs (fp16) at 256 to 16,384
// rows through cuBLASLt (the heuristic's algorithm, bias epilogue, residual as
// C) and through the stream-K kernel of streamk_gemm.cuh in each tiling, over
// every multiprocessor and over as many blocks as whole waves of tiles take;
// CUDA graph of kReps runs, weights L2-warm, us and ratio to cuBLASLt. Random
// operands; each tiling also prints its largest difference from cuBLASLt's
// output and whether a second run gave the same bits. With the argument
// `ceiling`: the tilings against their Config::kCeiling selves; `depth`:
// ping-pong with the TMA-store epilogue over 3, 4 and 5 ring slots (128-column
// out tiles) and 6 (64-column out tiles, stored in two passes).
//   nvcc -O2 -std=c++17 -arch=sm_90a -I include -I src -DBERTRT_CUDA_SM90A=1 \
//     bench/probes/streamk_gemm_probe.cu -lcublasLt -o streamk_gemm_probe
// Results (H200): bench/RESULTS.md.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../../src/core/status.cc"
#include "probe_util.h"
#include "streamk_gemm.cuh"

namespace bertrt::cuda {
bool WgmmaAttentionBuilt() { return true; }
}  // namespace bertrt::cuda

namespace {

void FillRandom(void* p, size_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<__half> h(n);
  for (auto& v : h) v = __float2half(u(rng));
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
}

std::vector<float> Download(const void* p, size_t n) {
  std::vector<__half> h(n);
  CK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
  return std::vector<float>(h.begin(), h.end());
}

}  // namespace

// With arguments ROWS NAME CTAS TILING (128100: tile width 128, cluster 1, no
// ping-pong; 128110 ping-pong; 128111 and TMA store; 256200: 256 wide, clusters
// of 2): that one case
// alone, three launches without a graph, then its graph timing (for ncu).
int main(int argc, char** argv) {
  using namespace bertrt;
  using namespace bertrt::cuda;
  constexpr int kReps = 20;
  ProbeContext p;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  void* workspace = nullptr;
  CK(cudaMalloc(&workspace, StreamKWorkspaceBytes()));
  CK(cudaMemset(workspace, 0, StreamKWorkspaceBytes()));
  std::mt19937 rng(7);
  for (int rows : {256, 1024, 2432, 4096, 16384}) {
    for (const GemmShape& sh : BertBaseGemms(rows)) {
      LtGemmCase gemm(sh, 1);
      FillRandom(gemm.x, size_t(rows) * sh.k, 1.0f, rng);
      FillRandom(gemm.w[0], size_t(sh.m) * sh.k, 1.0f / std::sqrt(float(sh.k)), rng);
      FillRandom(gemm.bias, sh.m, 0.5f, rng);
      FillRandom(gemm.res, size_t(rows) * sh.m, 1.0f, rng);
      const cublasLtMatmulAlgo_t algo =
          gemm.Heuristic(p.lt, 1, ProbeContext::kWorkspaceBytes).at(0).algo;
      const Epilogue epi =
          sh.epi == CUBLASLT_EPILOGUE_GELU_BIAS ? Epilogue::kBiasGeluTanh : Epilogue::kBias;
      auto args = [&](int ctas) {
        return StreamKGemmArgs{gemm.x,    rows, sh.k,     gemm.w[0],
                               gemm.bias, sh.m, epi,      sh.residual ? gemm.res : nullptr,
                               gemm.y,    ctas, workspace};
      };
      auto check = [](const Status& st) {
        if (!st.ok()) {
          std::printf("%s\n", st.ToString().c_str());
          std::exit(1);
        }
      };
      CK(gemm.Run(p.lt, algo, 0, p.ws, ProbeContext::kWorkspaceBytes, p.s));
      CK(cudaStreamSynchronize(p.s));
      const std::vector<float> want = Download(gemm.y, size_t(rows) * sh.m);
      const double flop = 2.0 * rows * sh.m * sh.k;
      const float lt_us = p.GraphUs(
          kReps, [&](int) { gemm.Run(p.lt, algo, 0, p.ws, ProbeContext::kWorkspaceBytes, p.s); });
      std::printf("rows %5d %-8s cublasLt %6.2f us (%3.0f TF)", rows, sh.name, lt_us,
                  flop / lt_us * 1e-6);
      // One tiling: its largest difference from cuBLASLt (and whether a
      // second run gave the same bits: the counters were left at zero), then
      // its time over every multiprocessor and over whole waves of tiles.
      auto tiling = [&](auto config) {
        using C = decltype(config);
        auto run = [&](int ctas, bool pdl) {
          check(LaunchForType<__half, C>(args(ctas), Stream{p.s, pdl}));
        };
        if (argc == 5) {
          if (rows != std::atoi(argv[1]) || std::string(argv[2]) != sh.name ||
              std::atoi(argv[4]) !=
                  C::kTileN * 1000 + C::kClusterM * 100 + C::kPingPong * 10 + C::kTmaStore)
            return;
          for (int i = 0; i < 3; ++i) run(std::atoi(argv[3]), false);
          CK(cudaStreamSynchronize(p.s));
          std::printf(" | %dx%d: %.2f us", C::kTileN, C::kClusterM,
                      p.GraphUs(kReps, [&](int) { run(std::atoi(argv[3]), true); }));
          return;
        }
        CK(cudaMemset(gemm.y, 0, size_t(rows) * sh.m * 2));
        run(sms, false);
        CK(cudaStreamSynchronize(p.s));
        CK(cudaGetLastError());
        const std::vector<float> got = Download(gemm.y, size_t(rows) * sh.m);
        double max_diff = 0;
        for (size_t i = 0; i < got.size(); ++i)
          max_diff = std::max(max_diff, double(std::fabs(got[i] - want[i])));
        run(sms, false);
        CK(cudaStreamSynchronize(p.s));
        const bool same_again = Download(gemm.y, size_t(rows) * sh.m) == got;
        const int tiles = (rows + C::kTileM - 1) / C::kTileM * (sh.m / C::kTileN);
        const int waves = (tiles + sms - 1) / sms;
        const int active =
            ActiveClusters(
                reinterpret_cast<const void*>(StreamKGemmKernel<__half, C, Epilogue::kBias>),
                C::kClusterM, C::kSmemBytes)
                .value();
        std::printf(" | %dx%dx%d%s%s%s, %d slots (%d clusters at once): diff %.4f%s", C::kTileM,
                    C::kTileN, C::kClusterM, C::kCeiling ? " CEILING" : "",
                    C::kPingPong ? " ping-pong" : "", C::kTmaStore ? " tma-store" : "", C::kStages,
                    active, max_diff, same_again ? "" : " SECOND RUN DIFFERS");
        for (int ctas : {sms, (tiles + waves - 1) / waves}) {
          const float us = p.GraphUs(kReps, [&](int) { run(ctas, true); });
          std::printf(" %d: %6.2f (%.3fx)", ctas, us, lt_us / us);
        }
      };
      if (argc == 2 && std::string(argv[1]) == "depth") {  // ring depth
        tiling(Config<128, 1, true, true, false, 128, 3>{});
        tiling(Config<128, 1, true, true, false, 128, 4>{});
        tiling(Config<128, 1, true, true>{});
        tiling(Config<128, 1, true, true, false, 128, 6, 64>{});
      } else if (argc == 2) {  // "ceiling": the consumers' own rate, against the real kernel
        tiling(Config<128, 1, true>{});
        tiling(Config<128, 1, true, false, true>{});
        tiling(Config<128, 1, true, true>{});
        tiling(Config<128, 1, true, true, true>{});
        tiling(Config<128, 1, false, true, false, 256>{});
        tiling(Config<128, 1, false, true, true, 256>{});
      } else {
        tiling(Config<128, 1>{});
        tiling(Config<128, 2>{});
        tiling(Config<256, 1>{});
        tiling(Config<256, 2>{});
        tiling(Config<128, 1, true>{});
        tiling(Config<128, 2, true>{});
        tiling(Config<128, 1, true, true>{});
        tiling(Config<128, 2, true, true>{});
        tiling(Config<128, 1, true, true, false, 128, 6, 64>{});
        tiling(Config<128, 1, false, true, false, 256>{});
        tiling(Config<128, 2, false, true, false, 256>{});
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  CK(cudaGetLastError());
  return 0;
}

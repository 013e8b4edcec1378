// Probe (not part of the build): BERT-base's four GEMMs (fp16) at 32 to 256
// rows through cuBLASLt (the heuristic's algorithm, bias epilogue, residual
// as C) and through the split-K kernel (src/backends/cuda/gemm/splitk_gemm.cu,
// compiled into this file) at 1-8 ways under programmatic dependent launch
// (as the engine launches it); CUDA graph of kReps runs, weights L2-warm
// (one buffer) and cold (a different buffer each run, kBufs of them), us.
//   nvcc -O2 -std=c++17 -arch=sm_90a -I include -I src -DBERTRT_CUDA_SM90A=1 \
//     bench/probes/splitk_gemm_probe.cu -lcublasLt -o splitk_gemm_probe
// Results (H200, 2026-11-30): bench/RESULTS.md.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../../src/backends/cuda/gemm/splitk_gemm.cu"
#include "../../src/core/status.cc"
#include "probe_util.h"

namespace bertrt::cuda {
bool WgmmaAttentionBuilt() { return true; }
}  // namespace bertrt::cuda

// With arguments ROWS NAME WAYS: that one case alone, kernel launches
// without a graph (for ncu).
int main(int argc, char** argv) {
  using namespace bertrt;
  using namespace bertrt::cuda;
  constexpr int kBufs = 32, kReps = 32;
  ProbeContext p;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int rows : {32, 64, 128, 256}) {
    for (const GemmShape& sh : BertBaseGemms(rows)) {
      LtGemmCase gemm(sh, kBufs);
      const cublasLtMatmulAlgo_t algo =
          gemm.Heuristic(p.lt, 1, ProbeContext::kWorkspaceBytes).at(0).algo;
      // The FFN input's GELU: cuBLASLt's tanh form in its epilogue (a lower
      // bound for the engine's erf path there, its bias GEMM plus the
      // activation kernel); the split-K kernel's erf form, as the engine runs it.
      const Epilogue epi =
          sh.epi == CUBLASLT_EPILOGUE_GELU_BIAS ? Epilogue::kBiasGelu : Epilogue::kBias;
      // ways 0: cuBLASLt.
      auto time_mode = [&](bool cold, int ways, bool pdl) {
        return p.GraphUs(kReps, [&](int r) {
          const int copy = cold ? r % kBufs : 0;
          if (ways == 0) {
            gemm.Run(p.lt, algo, copy, p.ws, ProbeContext::kWorkspaceBytes, p.s);
            return;
          }
          const SplitKGemmArgs args{gemm.x,    rows, sh.k, gemm.w[copy],
                                    gemm.bias, sh.m, epi,  sh.residual ? gemm.res : nullptr,
                                    gemm.y,    sms};
          const Status st = LaunchForType<__half>(args, ways, Stream{p.s, pdl});
          if (!st.ok()) {
            std::printf("%s\n", st.ToString().c_str());
            std::exit(1);
          }
        });
      };
      if (argc == 4) {
        if (rows != std::atoi(argv[1]) || std::string(argv[2]) != sh.name) continue;
        const SplitKGemmArgs args{gemm.x,    rows, sh.k, gemm.w[0],
                                  gemm.bias, sh.m, epi,  sh.residual ? gemm.res : nullptr,
                                  gemm.y,    sms};
        for (int i = 0; i < 3; ++i)
          CK(LaunchForType<__half>(args, std::atoi(argv[3]), Stream{p.s, false}).ok() ? 0 : 1);
        CK(cudaStreamSynchronize(p.s));
        continue;
      }
      std::printf("rows %3d %-8s (auto %d ways) cublasLt %5.2f/%5.2f | split-K ways: warm/cold",
                  rows, sh.name, SplitKWays(rows, sh.k, sh.m, sms), time_mode(false, 0, false),
                  time_mode(true, 0, false));
      for (int ways : {1, 2, 4, 8}) {
        if (ways > sh.k / 64) continue;
        std::printf(" %d: %5.2f/%5.2f", ways, time_mode(false, ways, true),
                    time_mode(true, ways, true));
      }
      std::printf(" | applies: %s",
                  SplitKLinearApplies(Precision::kFp16, 90, rows, sh.k, sh.m, epi) ? "yes" : "no");
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  CK(cudaGetLastError());
  return 0;
}

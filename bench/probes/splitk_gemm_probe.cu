// Probe (not part of the build): BERT-base's four GEMMs (fp16) at 32 to 256
// rows through cuBLASLt (the heuristic's algorithm, bias epilogue, residual
// as C) and through the split-K kernel (src/backends/cuda/splitk_gemm.cu,
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

#include "../../src/backends/cuda/splitk_gemm.cu"
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
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  void* ws;
  const size_t kWs = 32 << 20;
  CK(cudaMalloc(&ws, kWs));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int rows : {32, 64, 128, 256}) {
    for (const GemmShape& sh : BertBaseGemms(rows)) {
      LtGemmCase gemm(sh, kBufs);
      const cublasLtMatmulAlgo_t algo = gemm.Heuristic(lt, 1, kWs).at(0).algo;
      const Epilogue epi =
          sh.epi == CUBLASLT_EPILOGUE_GELU_BIAS ? Epilogue::kBiasGeluTanh : Epilogue::kBias;
      // ways 0: cuBLASLt.
      auto time_mode = [&](bool cold, int ways, bool pdl) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int r = 0; r < kReps; ++r) {
          const int copy = cold ? r % kBufs : 0;
          if (ways == 0) {
            gemm.Run(lt, algo, copy, ws, kWs, s);
          } else {
            const SplitKGemmArgs args{gemm.x,    rows, sh.k, gemm.w[copy],
                                      gemm.bias, sh.m, epi,  sh.residual ? gemm.res : nullptr,
                                      gemm.y,    sms};
            const Status st = LaunchForType<__half>(args, ways, Stream{s, pdl});
            if (!st.ok()) {
              std::printf("%s\n", st.ToString().c_str());
              std::exit(1);
            }
          }
        }
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 3; ++i) cudaGraphLaunch(ge, s);
        cudaEventRecord(e0, s);
        for (int i = 0; i < 10; ++i) cudaGraphLaunch(ge, s);
        cudaEventRecord(e1, s);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        return ms * 1000 / (10 * kReps);
      };
      if (argc == 4) {
        if (rows != std::atoi(argv[1]) || std::string(argv[2]) != sh.name) continue;
        const SplitKGemmArgs args{gemm.x,    rows, sh.k, gemm.w[0],
                                  gemm.bias, sh.m, epi,  sh.residual ? gemm.res : nullptr,
                                  gemm.y,    sms};
        for (int i = 0; i < 3; ++i)
          CK(LaunchForType<__half>(args, std::atoi(argv[3]), Stream{s, false}).ok() ? 0 : 1);
        CK(cudaStreamSynchronize(s));
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
                  SplitKLinearApplies(Precision::kFp16, 90, rows, sh.k, sh.m) ? "yes" : "no");
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  CK(cudaGetLastError());
  return 0;
}

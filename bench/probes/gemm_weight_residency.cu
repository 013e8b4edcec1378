// Probe (not part of the build): BERT-base's four GEMMs (fp16, the
// heuristic's algorithm) at 1 to 1,024 rows with their weights L2-warm (one
// weight buffer) against cold (a different buffer each run, 32 of them, so
// each run reads its weights from HBM); cold with the next run's weights
// prefetched into L2 (cp.async.bulk.prefetch) by a one-block kernel before
// each GEMM; warm with that kernel (its own cost); warm with an empty kernel
// between GEMMs (the cost of a graph node). CUDA graph of kReps runs.
//   nvcc -O2 -std=c++17 -arch=sm_90 gemm_weight_residency.cu -lcublasLt
// Results (H200, 2026-11-30): bench/RESULTS.md.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_util.h"

__global__ void Prefetch(const char* p, size_t bytes) {
  // each thread prefetches 64 KiB chunks
  for (size_t off = (size_t)threadIdx.x * 65536; off < bytes; off += (size_t)blockDim.x * 65536) {
    unsigned size = (unsigned)((bytes - off) < 65536 ? (bytes - off) : 65536);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(size) : "memory");
  }
}
__global__ void Empty() {}

int main() {
  constexpr int kBufs = 32, kReps = 32;
  ProbeContext p;
  for (int rows : {1, 8, 32, 40, 128, 1024}) {
    for (const GemmShape& sh : BertBaseGemms(rows)) {
      const size_t wbytes = size_t(sh.m) * sh.k * 2;
      LtGemmCase gemm(sh, kBufs);
      const cublasLtMatmulAlgo_t algo =
          gemm.Heuristic(p.lt, 1, ProbeContext::kWorkspaceBytes).at(0).algo;
      auto time_mode = [&](bool cold, int prefetch /*0 none, 1 prefetch next, 2 empty kernel*/) {
        return p.GraphUs(kReps, [&](int r) {
          if (prefetch == 1)
            Prefetch<<<1, 128, 0, p.s>>>((const char*)gemm.w[cold ? (r + 1) % kBufs : 0], wbytes);
          if (prefetch == 2) Empty<<<1, 32, 0, p.s>>>();
          gemm.Run(p.lt, algo, cold ? r % kBufs : 0, p.ws, ProbeContext::kWorkspaceBytes, p.s);
        });
      };
      float warm = time_mode(false, 0), cold = time_mode(true, 0), coldpf = time_mode(true, 1),
            warmpf = time_mode(false, 1), empty = time_mode(false, 2);
      std::printf(
          "rows %4d %-9s warm %.2f us  cold %.2f us  cold+prefetch-next %.2f us  warm+prefetch "
          "kernel %.2f  warm+empty kernel %.2f\n",
          rows, sh.name, warm, cold, coldpf, warmpf, empty);
      std::fflush(stdout);
    }
  }
  CK(cudaGetLastError());
  return 0;
}

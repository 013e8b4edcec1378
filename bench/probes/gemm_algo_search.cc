// Probe (not part of the build): how fast can cuBLASLt run BERT-base's four
// GEMMs (fp16, fp32 accumulation, bertrt's layouts and epilogues) at 128, 192
// and 2,560 rows with any algorithm configuration -- every algorithm id, tile,
// stage count, split-K and reduction scheme, custom option and CTA swizzle
// that cublasLtMatmulAlgoCheck accepts -- against the heuristic's first answer
// and the best of its first 8? Each candidate is screened with one timing;
// the 5 fastest are timed again. Timing: a CUDA graph of kReps back-to-back
// matmuls, replayed, L2 warm.
//   g++ -O2 -std=c++17 gemm_algo_search.cc -I$CUDA/include -L$CUDA/lib64 -lcublasLt -lcudart
// Results (H200, 2026-11-30): bench/RESULTS.md.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_util.h"

constexpr int kReps = 20;

// One configuration of an algorithm id, as the search enumerates it.
struct Config {
  int id;
  uint32_t tile, stages;
  int32_t split, custom, swizzle;
  uint32_t reduction;
};
void Configure(cublasLtMatmulAlgo_t* algo, const Config& c) {
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof(c.tile));
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages,
                                       sizeof(c.stages));
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.split,
                                       sizeof(c.split));
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction,
                                       sizeof(c.reduction));
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c.custom,
                                       sizeof(c.custom));
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c.swizzle,
                                       sizeof(c.swizzle));
}

int main() {
  int rows_list[] = {128, 192, 2560};
  ProbeContext p;
  const cublasLtHandle_t lt = p.lt;
  void* const ws = p.ws;
  const size_t kWs = ProbeContext::kWorkspaceBytes;
  const cudaStream_t s = p.s;
  const cudaEvent_t e0 = p.e0, e1 = p.e1;
  for (int rows : rows_list) {
    for (const GemmShape& sh : BertBaseGemms(rows)) {
      const LtGemmCase gemm(sh, 1);
      auto time_algo = [&](const cublasLtMatmulAlgo_t& algo, int launches) -> float {
        // warm + validity
        if (gemm.Run(lt, algo, 0, ws, kWs, s) != 0) return -1;
        if (cudaStreamSynchronize(s) != cudaSuccess) return -1;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        for (int r = 0; r < kReps; ++r) gemm.Run(lt, algo, 0, ws, kWs, s);
        if (cudaStreamEndCapture(s, &graph) != cudaSuccess) {
          cudaGetLastError();
          return -1;
        }
        if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
          cudaGraphDestroy(graph);
          cudaGetLastError();
          return -1;
        }
        cudaGraphLaunch(exec, s);
        cudaEventRecord(e0, s);
        for (int l = 0; l < launches; ++l) cudaGraphLaunch(exec, s);
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        if (cudaGetLastError() != cudaSuccess) return -1;
        return ms * 1000.0f / (launches * kReps);
      };
      // heuristic
      const std::vector<cublasLtMatmulHeuristicResult_t> res8 = gemm.Heuristic(lt, 8, kWs);
      float heur = time_algo(res8[0].algo, 10);
      float heur_best = heur;
      for (size_t i = 1; i < res8.size(); ++i) {
        float tm = time_algo(res8[i].algo, 10);
        if (tm > 0) heur_best = std::min(heur_best, tm);
      }
      // exhaustive
      int ids[256], nids = 0;
      CK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F,
                                  CUDA_R_16F, CUDA_R_16F, 256, ids, &nids));
      struct Result {
        float us;
        Config config;
      };
      std::vector<Result> results;
      int checked = 0, valid = 0;
      for (int ii = 0; ii < nids; ++ii) {
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F,
                                   CUDA_R_16F, CUDA_R_16F, ids[ii], &algo) != 0)
          continue;
        size_t sz = 0;
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &sz);
        std::vector<uint32_t> tiles(std::max<size_t>(sz / 4, 1), CUBLASLT_MATMUL_TILE_UNDEFINED);
        if (sz)
          cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), sz,
                                            &sz);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, nullptr, 0, &sz);
        std::vector<uint32_t> stages(std::max<size_t>(sz / 4, 1), CUBLASLT_MATMUL_STAGES_UNDEFINED);
        if (sz)
          cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data(), sz,
                                            &sz);
        int32_t splitk_support = 0, custom_max = 0, swizzle_support = 0;
        uint32_t red_mask = 0;
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_support,
                                          sizeof(int32_t), &sz);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max,
                                          sizeof(int32_t), &sz);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT,
                                          &swizzle_support, sizeof(int32_t), &sz);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &red_mask,
                                          sizeof(uint32_t), &sz);
        std::vector<int> splits = {1};
        if (splitk_support) splits = {1, 2, 3, 4, 6, 8};
        for (uint32_t tile : tiles)
          for (uint32_t st : stages)
            for (int split : splits)
              for (int custom = 0; custom <= std::min(custom_max, 7); ++custom)
                for (int swz = 0; swz <= (swizzle_support ? 1 : 0); ++swz) {
                  std::vector<uint32_t> reds = {CUBLASLT_REDUCTION_SCHEME_NONE};
                  if (split > 1) {
                    reds.clear();
                    for (uint32_t r : {1u, 2u, 4u})
                      if (red_mask & r) reds.push_back(r);
                  }
                  for (uint32_t red : reds) {
                    const Config config{ids[ii], tile, st, split, custom, swz, red};
                    Configure(&algo, config);
                    ++checked;
                    cublasLtMatmulHeuristicResult_t hr{};
                    if (cublasLtMatmulAlgoCheck(lt, gemm.desc, gemm.a, gemm.b, gemm.c, gemm.c,
                                                &algo, &hr) != 0 ||
                        hr.state != 0 || hr.workspaceSize > kWs)
                      continue;
                    ++valid;
                    float us = time_algo(algo, 2);
                    if (us > 0) results.push_back({us, config});
                  }
                }
      }
      std::sort(results.begin(), results.end(),
                [](const Result& x, const Result& y) { return x.us < y.us; });
      // re-time top 5 properly
      float best = 1e9;
      Result bestr{};
      for (size_t i = 0; i < std::min<size_t>(5, results.size()); ++i) {
        const Result& r = results[i];
        cublasLtMatmulAlgo_t algo;
        cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F,
                               CUDA_R_16F, CUDA_R_16F, r.config.id, &algo);
        Configure(&algo, r.config);
        float us = time_algo(algo, 10);
        if (us > 0 && us < best) {
          best = us;
          bestr = r;
        }
      }
      float heur2 = time_algo(res8[0].algo, 10);
      int hid = 0;
      size_t sz;
      cublasLtMatmulAlgoConfigGetAttribute(&res8[0].algo, CUBLASLT_ALGO_CONFIG_ID, &hid,
                                           sizeof(hid), &sz);
      std::printf(
          "rows %5d %-9s heuristic %.2f/%.2f us (id %d; best of its 8: %.2f)  exhaustive best %.2f "
          "us (id %d tile %d stages %d split %d red %d custom %d swz %d)  configs %d checked, %d "
          "valid, %zu ran\n",
          rows, sh.name, heur, heur2, hid, heur_best, best, bestr.config.id, (int)bestr.config.tile,
          (int)bestr.config.stages, bestr.config.split, (int)bestr.config.reduction,
          bestr.config.custom, bestr.config.swizzle, checked, valid, results.size());
      std::fflush(stdout);
    }
  }
  return 0;
}

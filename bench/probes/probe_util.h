// What the GEMM probes share (each is built on its own; see its first lines).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

// Exits with the failing call, its code and line when x is not 0 (success).
#define CK(x)                                                      \
  do {                                                             \
    auto e_ = (x);                                                 \
    if (e_ != 0) {                                                 \
      std::printf("fail %s: %d line %d\n", #x, (int)e_, __LINE__); \
      std::exit(1);                                                \
    }                                                              \
  } while (0)

// One of BERT-base's four GEMMs at `n` rows, in bertrt's column-major view
// (y[m, n] = W[k, m]^T x[k, n]); `residual`: the output adds the residual
// as cuBLASLt's C (beta = 1).
struct GemmShape {
  const char* name;
  int m, n, k;
  cublasLtEpilogue_t epi;
  bool residual;
};
inline std::array<GemmShape, 4> BertBaseGemms(int rows) {
  return {{{"qkv", 2304, rows, 768, CUBLASLT_EPILOGUE_BIAS, false},
           {"attn_out", 768, rows, 768, CUBLASLT_EPILOGUE_BIAS, true},
           {"ffn_in", 3072, rows, 768, CUBLASLT_EPILOGUE_GELU_BIAS, false},
           {"ffn_out", 768, rows, 3072, CUBLASLT_EPILOGUE_BIAS, true}}};
}

// A GEMM shape's operands on the device (zeroed; `weight_copies` weights, so
// that a run can read its weight from HBM instead of L2) and its cuBLASLt
// descriptor and layouts, bias epilogue as the shape says, residual as C.
struct LtGemmCase {
  const GemmShape& sh;
  std::vector<void*> w;
  void *x = nullptr, *res = nullptr, *y = nullptr, *bias = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  float alpha = 1, beta = 0;

  LtGemmCase(const GemmShape& shape, int weight_copies) : sh(shape), w(weight_copies) {
    const size_t wbytes = size_t(sh.m) * sh.k * 2;
    for (auto& p : w) {
      CK(cudaMalloc(&p, wbytes));
      CK(cudaMemset(p, 0, wbytes));
    }
    for (auto [p, bytes] : {std::pair{&x, size_t(sh.k) * sh.n * 2},
                            {&res, size_t(sh.m) * sh.n * 2},
                            {&y, size_t(sh.m) * sh.n * 2},
                            {&bias, size_t(sh.m) * 2}}) {
      CK(cudaMalloc(p, bytes));
      CK(cudaMemset(*p, 0, bytes));
    }
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &sh.epi,
                                      sizeof(sh.epi)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                      sizeof(bias)));
    CK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, sh.k, sh.m, sh.k));
    CK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16F, sh.k, sh.n, sh.k));
    CK(cublasLtMatrixLayoutCreate(&c, CUDA_R_16F, sh.m, sh.n, sh.m));
    beta = sh.residual ? 1 : 0;
  }
  ~LtGemmCase() {
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(desc);
    for (void* p : w) cudaFree(p);
    for (void* p : {x, res, y, bias}) cudaFree(p);
  }
  LtGemmCase(const LtGemmCase&) = delete;
  LtGemmCase& operator=(const LtGemmCase&) = delete;

  // Up to `n` of the heuristic's answers, best first.
  std::vector<cublasLtMatmulHeuristicResult_t> Heuristic(cublasLtHandle_t lt, int n,
                                                         size_t workspace_bytes) const {
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &workspace_bytes, sizeof(workspace_bytes)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(n);
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref, n, results.data(), &found));
    cublasLtMatmulPreferenceDestroy(pref);
    results.resize(found);
    return results;
  }

  // y = epilogue(W x + bias [+ residual]) with weight copy `copy`.
  cublasStatus_t Run(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t& algo, int copy,
                     void* workspace, size_t workspace_bytes, cudaStream_t s) const {
    return cublasLtMatmul(lt, desc, &alpha, w[copy], a, x, b, &beta, sh.residual ? res : y, c, y, c,
                          &algo, workspace, workspace_bytes, s);
  }
};

// What the GEMM probes set up once: a cuBLASLt handle and workspace, a
// stream and two events; and their timing.
struct ProbeContext {
  static constexpr size_t kWorkspaceBytes = 32 << 20;
  cublasLtHandle_t lt = nullptr;
  void* ws = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;

  ProbeContext() {
    CK(cublasLtCreate(&lt));
    CK(cudaMalloc(&ws, kWorkspaceBytes));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }

  // Microseconds per call of enqueue(r), r = 0..reps-1, each putting its
  // work on `s`: captured as one CUDA graph, replayed 3 times unmeasured
  // and 10 times measured.
  template <typename Enqueue>
  float GraphUs(int reps, Enqueue&& enqueue) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < reps; ++r) enqueue(r);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; ++i) cudaGraphLaunch(ge, s);
    cudaEventRecord(e0, s);
    for (int i = 0; i < 10; ++i) cudaGraphLaunch(ge, s);
    cudaEventRecord(e1, s);
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return ms * 1000 / (10 * reps);
  }
};

// What the GEMM probes share (each is built on its own; see its first lines).
#pragma once

#include <cublasLt.h>

#include <array>
#include <cstdio>
#include <cstdlib>

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

// cuBLASLt, opened at run time instead of linked. libcublasLt is 540 MB, and
// the dynamic linker mapping it before main() was 0.36 s of a 1.36 s cold
// start on the H200 machine. Opened with dlopen, it loads on a thread of its
// own (GpuContextWarmup starts it) while the model is read, and a process
// that never runs a CUDA engine never loads it.
#pragma once

#include <cublasLt.h>

#include "bertrt/status.h"

namespace bertrt::cuda {

// The entry points the engine uses, resolved from the library.
struct CublasLtApi {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtDestroy) Destroy;
  decltype(&cublasLtGetVersion) GetVersion;
  decltype(&cublasLtMatmul) Matmul;
  decltype(&cublasLtMatmulAlgoCheck) MatmulAlgoCheck;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
};

// Opens libcublasLt.so.<the major version built against> once per process
// (thread-safe; later calls return the same table or the same error).
StatusOr<const CublasLtApi*> CublasLt();

// Makes a first heuristic query on the current device and forgets it: the
// first one in a process loads cuBLASLt's tables (~0.1 s on the H200), which
// GpuContextWarmup spends while the engine uploads its weights.
void WarmUpCublasLt();

}  // namespace bertrt::cuda

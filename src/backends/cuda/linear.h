// Which GEMM runs each linear layer of the forward, and with which epilogue:
// the policy, apart from the GEMMs themselves (gemm.h: cuBLASLt;
// splitk_gemm.h: bertrt's split-K kernel).
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// The FFN's first GEMM's epilogue; with plain kBias the activation runs as a
// kernel of its own. The fp32 engine keeps every activation in its own kernel
// so that it matches the CPU engine's exact formulas; cuBLASLt's GELU
// epilogue is the tanh form, so the erf GELU runs as a kernel unless
// CudaEngineOptions::approximate_erf_gelu.
Epilogue FfnEpilogue(const ModelConfig& config, const CudaEngineOptions& options);

class LinearLayers {
 public:
  // `gemm` outlives this; `splitk` is CudaEngineOptions::splitk_gemms.
  LinearLayers(LtGemm& gemm, Precision precision, int compute_capability, int sm_count,
               bool splitk, bool overlap_launch)
      : gemm_(gemm),
        precision_(precision),
        compute_capability_(compute_capability),
        sm_count_(sm_count),
        splitk_(splitk),
        overlap_launch_(overlap_launch) {}

  // y = act(x W^T + bias [+ residual]) on `stream`: the split-K kernel where
  // it applies (few rows, K at least the width, sm_90 fp16/bf16), cuBLASLt
  // elsewhere.
  Status Run(const void* x, int rows, int in, const void* w, const void* bias, int out,
             Epilogue epilogue, const void* residual, void* y, cudaStream_t stream) const;

 private:
  LtGemm& gemm_;
  Precision precision_;
  int compute_capability_, sm_count_;
  bool splitk_, overlap_launch_;
};

}  // namespace bertrt::cuda

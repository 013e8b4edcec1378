// Which GEMM runs each linear layer of the forward, and with which epilogue:
// the policy, apart from the GEMMs themselves (gemm.h: cuBLASLt;
// splitk_gemm.h: bertrt's split-K kernel).
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/gemm/epilogue.h"
#include "backends/cuda/gemm/gemm.h"
#include "backends/cuda/gemm/int8_gemm.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// The FFN's first GEMM's epilogue; with plain kBias the activation runs as a
// kernel of its own. The fp32 engine keeps every activation in its own kernel
// so that it matches the CPU engine's exact formulas. In fp16/bf16 the erf
// GELU is kBiasGelu (LinearLayers::Run), or cuBLASLt's tanh form where
// CudaEngineOptions::approximate_erf_gelu.
Epilogue FfnEpilogue(const ModelConfig& config, const CudaEngineOptions& options);
// The same for a GEMM followed by `act` (FfnEpilogue's is hidden_act).
Epilogue ActivationEpilogue(HiddenAct act, const CudaEngineOptions& options);

// What cuBLASLt runs of a layer with epilogue `e`: all of it but the erf
// GELU, which LinearLayers applies after it where BiasGeluGemm does not run.
inline Epilogue LtPartOf(Epilogue e) { return e == Epilogue::kBiasGelu ? Epilogue::kBias : e; }

class LinearLayers {
 public:
  // `gemm` outlives this; `splitk` and `fused_gelu` are Tuning::splitk_gemms
  // and fused_gelu_gemm.
  LinearLayers(LtGemm& gemm, Precision precision, int compute_capability, int sm_count, bool splitk,
               bool fused_gelu, bool overlap_launch)
      : gemm_(gemm),
        precision_(precision),
        compute_capability_(compute_capability),
        sm_count_(sm_count),
        splitk_(splitk),
        fused_gelu_(fused_gelu),
        overlap_launch_(overlap_launch) {}

  // y = act(x W^T + bias [+ residual]) on `stream`: the split-K kernel where
  // it applies (few rows, K at least the width or the erf GELU, sm_90
  // fp16/bf16); for the erf GELU (kBiasGelu, no residual) BiasGeluGemm where
  // it applies (sm_90, at least kFusedGeluMinRows rows), else cuBLASLt and
  // the activation kernel; cuBLASLt elsewhere.
  Status Run(const void* x, int rows, int in, const void* w, const void* bias, int out,
             Epilogue epilogue, const void* residual, void* y, cudaStream_t stream) const;
  // The same for an fp8 Linear whose input `x` is already E4M3
  // (QuantizeToE4M3), `scale` the input's times the weight's: cuBLASLt's FP8
  // GEMM, the erf GELU as a kernel after it.
  Status RunFp8(const void* x, int rows, int in, const void* w, float scale, const void* bias,
                int out, Epilogue epilogue, const void* residual, void* y,
                cudaStream_t stream) const;
  // An int8 Linear (Int8Gemm; `a` but for its gelu and sm_count) whose
  // input is already uint8 with its rows' scales and zero points
  // (QuantizeRowsToUint8): the erf GELU in the GEMM's epilogue, the other
  // activations a kernel after it.
  Status RunInt8(Int8GemmArgs a, Epilogue epilogue, cudaStream_t stream) const;

 private:
  LtGemm& gemm_;
  Precision precision_;
  int compute_capability_, sm_count_;
  bool splitk_, fused_gelu_, overlap_launch_;
};

}  // namespace bertrt::cuda

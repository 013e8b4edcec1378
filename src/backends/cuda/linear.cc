#include "backends/cuda/linear.h"

#include "backends/cuda/splitk_gemm.h"

namespace bertrt::cuda {

Epilogue FfnEpilogue(const ModelConfig& c, const CudaEngineOptions& options) {
  if (options.precision == Precision::kFp32) return Epilogue::kBias;
  if (c.hidden_act == HiddenAct::kGeluTanh ||
      (c.hidden_act == HiddenAct::kGelu && options.approximate_erf_gelu))
    return Epilogue::kBiasGeluTanh;
  if (c.hidden_act == HiddenAct::kRelu) return Epilogue::kBiasRelu;
  return Epilogue::kBias;
}

Status LinearLayers::Run(const void* x, int rows, int in, const void* w, const void* bias, int out,
                         Epilogue epilogue, const void* residual, void* y,
                         cudaStream_t stream) const {
  if (splitk_ && SplitKLinearApplies(precision_, compute_capability_, rows, in, out))
    return SplitKLinear(precision_,
                        {x, rows, in, w, bias, out, epilogue, residual, y, sm_count_},
                        {stream, overlap_launch_});
  return gemm_.Linear(x, rows, in, w, bias, out, epilogue, residual, y, stream);
}

}  // namespace bertrt::cuda

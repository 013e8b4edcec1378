#include "backends/cuda/gemm/linear.h"

#include "backends/cuda/gemm/bias_gelu_gemm.h"
#include "backends/cuda/gemm/splitk_gemm.h"
#include "backends/cuda/ops/elementwise.h"

namespace bertrt::cuda {
namespace {

// Rows from which BiasGeluGemm beats cuBLASLt's bias GEMM plus the
// activation kernel over its output (BERT-base's FFN on the H200,
// bench/RESULTS.md 2026-12-01: even at 2,432 rows, faster above; at 1,024
// rows cuBLASLt's smaller tiles fill the GPU better).
constexpr int kFusedGeluMinRows = 2432;

}  // namespace

Epilogue FfnEpilogue(const ModelConfig& c, const CudaEngineOptions& options) {
  // A gated FFN activates half of the GEMM's output and multiplies it by the
  // other half: a kernel of its own (GatedActivation).
  if (c.gated_ffn) return Epilogue::kBias;
  return ActivationEpilogue(c.hidden_act, options);
}

Epilogue ActivationEpilogue(HiddenAct act, const CudaEngineOptions& options) {
  if (options.precision == Precision::kFp32) return Epilogue::kBias;
  if (act == HiddenAct::kGeluTanh || (act == HiddenAct::kGelu && options.approximate_erf_gelu))
    return Epilogue::kBiasGeluTanh;
  if (act == HiddenAct::kRelu) return Epilogue::kBiasRelu;
  if (act == HiddenAct::kGelu) return Epilogue::kBiasGelu;
  return Epilogue::kBias;
}

Status LinearLayers::Run(const void* x, int rows, int in, const void* w, const void* bias, int out,
                         Epilogue epilogue, const void* residual, void* y,
                         cudaStream_t stream) const {
  const bool erf_gelu = epilogue == Epilogue::kBiasGelu;
  if (erf_gelu && residual) return InvalidArgument("the erf GELU epilogue takes no residual");
  // fused_gelu_ switches the erf GELU in a GEMM's epilogue (split-K's or
  // BiasGeluGemm's) off as a whole, for A/B runs and the parity suite.
  if (splitk_ && (fused_gelu_ || !erf_gelu) &&
      SplitKLinearApplies(precision_, compute_capability_, rows, in, out, epilogue))
    return SplitKLinear(precision_, {x, rows, in, w, bias, out, epilogue, residual, y, sm_count_},
                        {stream, overlap_launch_});
  if (!erf_gelu) return gemm_.Linear(x, rows, in, w, bias, out, epilogue, residual, y, stream);
  if (fused_gelu_ && rows >= kFusedGeluMinRows &&
      BiasGeluGemmApplies(precision_, compute_capability_, in, out))
    return BiasGeluGemm(precision_, {x, rows, in, w, bias, out, y, sm_count_}, stream);
  RETURN_IF_ERROR(gemm_.Linear(x, rows, in, w, bias, out, Epilogue::kBias, nullptr, y, stream));
  return ActivationInPlace(precision_, HiddenAct::kGelu, y, size_t(rows) * out,
                           {stream, overlap_launch_});
}

Status LinearLayers::RunFp8(const void* x, int rows, int in, const void* w, float scale,
                            const void* bias, int out, Epilogue epilogue, const void* residual,
                            void* y, cudaStream_t stream) const {
  if (epilogue != Epilogue::kBiasGelu)
    return gemm_.LinearFp8(x, rows, in, w, scale, bias, out, epilogue, residual, y, stream);
  if (residual) return InvalidArgument("the erf GELU epilogue takes no residual");
  RETURN_IF_ERROR(
      gemm_.LinearFp8(x, rows, in, w, scale, bias, out, Epilogue::kBias, nullptr, y, stream));
  return ActivationInPlace(precision_, HiddenAct::kGelu, y, size_t(rows) * out,
                           {stream, overlap_launch_});
}

Status LinearLayers::RunInt8(Int8GemmArgs a, Epilogue epilogue, cudaStream_t stream) const {
  a.gelu = epilogue == Epilogue::kBiasGelu;
  a.sm_count = sm_count_;
  if (a.residual && epilogue != Epilogue::kBias)
    return InvalidArgument("an activation epilogue takes no residual");
  RETURN_IF_ERROR(Int8Gemm(precision_, a, stream));
  if (epilogue == Epilogue::kBias || a.gelu) return Status::Ok();
  const HiddenAct act = epilogue == Epilogue::kBiasRelu ? HiddenAct::kRelu : HiddenAct::kGeluTanh;
  return ActivationInPlace(precision_, act, a.y, size_t(a.rows) * a.out,
                           {stream, overlap_launch_});
}

}  // namespace bertrt::cuda

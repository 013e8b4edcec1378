// The plan builder's GEMM timing (bertrt build --device cuda): cuBLASLt's
// candidates for the encoder's four GEMMs (the weight schema's encoder
// Linears, with their widths), timed at every batch size in tokens that the
// engine rounds batches to.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/gemm/gemm.h"
#include "backends/cuda/gemm/linear.h"
#include "backends/cuda/util/cuda_check.h"
#include "backends/cuda/util/device_memory.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/devices.h"
#include "model/weight_schema.h"

namespace bertrt {

StatusOr<std::vector<GemmChoice>> TimeGemms(const ModelConfig& config,
                                            const CudaEngineOptions& options, int max_tokens,
                                            const std::function<void(int, int)>& progress) {
  ASSIGN_OR_RETURN(std::vector<GpuInfo> gpus, ListGpus());
  if (options.device < 0 || options.device >= static_cast<int>(gpus.size()))
    return InvalidArgument("GEMM timing: GPU " + std::to_string(options.device) +
                           " does not exist");
  const GpuInfo& gpu = gpus[options.device];
  CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu.index));
  cuda::LtGemm gemm;
  RETURN_IF_ERROR(gemm.Init(options.precision, cuda::kGemmWorkspaceBytes, gpu.name, true));
  // The batch sizes the engine runs at: every token bucket up to max_tokens.
  std::vector<int> buckets;
  for (int t = cuda::kTokenBucket; t <= cuda::TokenBucket(max_tokens); t = cuda::TokenBucket(t + 1))
    buckets.push_back(t);
  // The encoder's four GEMMs, as EncoderForward runs them through cuBLASLt:
  // out, in, epilogue, residual (the erf GELU's fused kernel, where it
  // runs instead, has no candidates to choose from). Every layer's are the
  // same: the first layer's.
  struct Gemm {
    size_t out, in;
    cuda::Epilogue epilogue;
    bool residual;
  };
  std::vector<Gemm> encoder_gemms;
  const cuda::Epilogue ffn = cuda::LtPartOf(cuda::FfnEpilogue(config, options));
  for (const model::WeightGroup& g : model::WeightSchema(config, false, false)) {
    if (g.index != 0 || !model::IsEncoderLinear(g.role)) continue;
    const std::vector<int64_t>& shape = g.tensors[0].shape;  // [out, in]
    encoder_gemms.push_back(
        {size_t(shape[0]), size_t(shape[1]),
         g.role == model::Role::kFfnIn ? ffn : cuda::Epilogue::kBias,
         g.role == model::Role::kAttnOut || g.role == model::Role::kFfnOut});
  }
  size_t widest = 0;
  for (const Gemm& s : encoder_gemms) widest = std::max({widest, s.out, s.in});
  const size_t m = buckets.back(), h = config.hidden_size;
  const size_t e = DTypeSize(PrecisionDType(options.precision));
  // Operands with the GEMMs' shapes; their values do not matter to the
  // timing, but all-zero inputs would draw less power than real ones.
  cuda::DeviceBuffer x, w, bias, residual, y;
  const std::string hint = "build with a smaller --max-batch-tokens";
  RETURN_IF_ERROR(x.Allocate(m * widest * e, "GEMM timing inputs", hint));
  RETURN_IF_ERROR(w.Allocate(widest * widest * e, "GEMM timing weights", hint));
  RETURN_IF_ERROR(bias.Allocate(widest * e, "GEMM timing bias", hint));
  RETURN_IF_ERROR(residual.Allocate(m * h * e, "GEMM timing residual", hint));
  RETURN_IF_ERROR(y.Allocate(m * widest * e, "GEMM timing outputs", hint));
  for (cuda::DeviceBuffer* b : {&x, &w, &bias, &residual})
    CUDA_RETURN_IF_ERROR(cudaMemset(b->get(), 0x2f, b->size()));
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Status st = Status::Ok();
  for (size_t i = 0; i < buckets.size() && st.ok(); ++i) {
    for (const Gemm& g : encoder_gemms) {
      st = gemm.Linear(x.get(), buckets[i], static_cast<int>(g.in), w.get(), bias.get(),
                       static_cast<int>(g.out), g.epilogue, g.residual ? residual.get() : nullptr,
                       y.get(), stream);
      if (!st.ok()) break;
    }
    if (st.ok()) st = cuda::CudaStatus(cudaStreamSynchronize(stream), "GEMM timing");
    if (progress) progress(static_cast<int>(i) + 1, static_cast<int>(buckets.size()));
  }
  cudaStreamDestroy(stream);
  RETURN_IF_ERROR(st);
  ASSIGN_OR_RETURN(const std::string prefix, cuda::GemmChoicePrefix(gpu.name, options.precision));
  return cuda::GemmChoicesWithPrefix(prefix);
}

}  // namespace bertrt

// The plan builder's GEMM timing (bertrt build --device cuda): cuBLASLt's
// candidates for the encoder's four GEMMs, timed at every batch size in
// tokens that the engine rounds batches to.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/batch_shape.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/linear.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/devices.h"

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
  const size_t m = buckets.back(), h = config.hidden_size, inter = config.intermediate_size;
  const size_t e = DTypeSize(PrecisionDType(options.precision));
  const size_t widest = std::max(3 * h, inter);
  // Operands with the GEMMs' shapes; their values do not matter to the
  // timing, but all-zero inputs would draw less power than real ones.
  cuda::DeviceBuffer x, w, bias, residual, y;
  const std::string hint = "build with a smaller --max-batch-tokens";
  RETURN_IF_ERROR(x.Allocate(m * widest * e, "GEMM timing inputs", hint));
  RETURN_IF_ERROR(w.Allocate(widest * std::max(h, inter) * e, "GEMM timing weights", hint));
  RETURN_IF_ERROR(bias.Allocate(widest * e, "GEMM timing bias", hint));
  RETURN_IF_ERROR(residual.Allocate(m * h * e, "GEMM timing residual", hint));
  RETURN_IF_ERROR(y.Allocate(m * widest * e, "GEMM timing outputs", hint));
  for (cuda::DeviceBuffer* b : {&x, &w, &bias, &residual})
    CUDA_RETURN_IF_ERROR(cudaMemset(b->get(), 0x2f, b->size()));
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const cuda::Epilogue ffn = cuda::LtPartOf(cuda::FfnEpilogue(config, options));
  // The encoder's four GEMMs, as EncoderForward runs them through cuBLASLt:
  // out, in, epilogue, residual (the erf GELU's fused kernel, where it
  // runs instead, has no candidates to choose from).
  const std::tuple<size_t, size_t, cuda::Epilogue, bool> encoder_gemms[] = {
      {3 * h, h, cuda::Epilogue::kBias, false},
      {h, h, cuda::Epilogue::kBias, true},
      {inter, h, ffn, false},
      {h, inter, cuda::Epilogue::kBias, true}};
  Status st = Status::Ok();
  for (size_t i = 0; i < buckets.size() && st.ok(); ++i) {
    for (const auto& [n, k, epilogue, with_residual] : encoder_gemms) {
      st = gemm.Linear(x.get(), buckets[i], static_cast<int>(k), w.get(), bias.get(),
                       static_cast<int>(n), epilogue, with_residual ? residual.get() : nullptr,
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

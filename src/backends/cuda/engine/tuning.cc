#include "backends/cuda/engine/tuning.h"

#include <cstdlib>
#include <string_view>

namespace bertrt::cuda {
namespace {

bool EnvIs(const char* name, std::string_view value) {
  const char* set = std::getenv(name);
  return set && value == set;
}

}  // namespace

Tuning Tuning::FromEnvironment() {
  Tuning t;
  t.cuda_graphs = !EnvIs("BERTRT_CUDA_GRAPHS", "0");
  t.time_gemms = EnvIs("BERTRT_GEMM_TUNING", "1");
  t.overlap_kernel_launches = !EnvIs("BERTRT_PDL", "0");
  t.splitk_gemms = !EnvIs("BERTRT_SPLITK_GEMM", "0");
  t.fused_gelu_gemm = !EnvIs("BERTRT_FUSED_GELU_GEMM", "0");
  t.tma_attention = !EnvIs("BERTRT_TMA_ATTENTION", "0");
  t.attention_windows = !EnvIs("BERTRT_ATTENTION_WINDOWS", "0");
  t.first_query_attention = !EnvIs("BERTRT_FIRST_QUERY_ATTENTION", "0");
  t.fused_quantization = !EnvIs("BERTRT_FUSED_QUANTIZATION", "0");
  return t;
}

}  // namespace bertrt::cuda

// The engine's instance of sm90/bias_gelu_gemm.cuh (see bias_gelu_gemm.h).
#include "backends/cuda/gemm/sm90/bias_gelu_gemm.cuh"

namespace bertrt::cuda {
namespace {

// Ping-pong: two consumer warpgroups, each its own 128 x 128 tile, one's
// epilogue (bias and GELU) running under the other's products; clusters of
// 2 along N, each x tile multicast to both. Of the tilings timed by
// bench/probes/bias_gelu_gemm_probe.cu (bench/RESULTS.md, 2026-12-01) the
// fastest at BERT-large's 98,304 rows (1.52 ms against 1.59 without
// clusters and 1.61-1.64 for 256 x 128 / 128 x 256 tiles shared by both
// warpgroups) and within 4% of the fastest at BERT-base's shapes.
template <class T>
using EngineKernel = sm90::BiasGeluGemmKernel<
    T, cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_2, cute::_1>,
    cutlass::gemm::KernelTmaWarpSpecializedPingpong, cutlass::epilogue::TmaWarpSpecialized>;

}  // namespace

bool BiasGeluGemmBuilt() { return true; }

Status BiasGeluGemm(Precision p, const BiasGeluGemmArgs& a, cudaStream_t stream) {
  if (a.in % 8 || a.out % 8)
    return InvalidArgument("BiasGeluGemm: in and out must be multiples of 8");
  if (a.rows == 0) return Status::Ok();
  switch (p) {
    case Precision::kFp16:
      return EngineKernel<cutlass::half_t>::Run(a, stream);
    case Precision::kBf16:
      return EngineKernel<cutlass::bfloat16_t>::Run(a, stream);
    default:
      return InvalidArgument("BiasGeluGemm: fp16 or bf16 only");
  }
}

}  // namespace bertrt::cuda

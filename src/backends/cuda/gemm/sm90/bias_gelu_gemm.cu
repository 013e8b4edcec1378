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

// FP8: 128 x 128 tiles 128 deep (a 128-byte row of E4M3 per k-block, the
// TMA's widest swizzle), otherwise the fp16 kernel's choice; not yet timed
// against other tilings.
template <class T>
using Fp8EngineKernel = sm90::Fp8BiasGeluGemmKernel<
    T, cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_2, cute::_1>,
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

namespace bertrt::cuda {

Status Fp8BiasGeluGemm(Precision p, const Fp8BiasGeluGemmArgs& a, cudaStream_t stream) {
  if (a.in % 16 || a.out % 16)
    return InvalidArgument("Fp8BiasGeluGemm: in and out must be multiples of 16");
  if (!(a.scale > 0.0f) || !(a.next_scale > 0.0f))
    return InvalidArgument("Fp8BiasGeluGemm: the scales must be positive");
  if (a.rows == 0) return Status::Ok();
  switch (p) {
    case Precision::kFp16:
      return Fp8EngineKernel<cutlass::half_t>::Run(a, stream);
    case Precision::kBf16:
      return Fp8EngineKernel<cutlass::bfloat16_t>::Run(a, stream);
    default:
      return InvalidArgument("Fp8BiasGeluGemm: fp16 or bf16 only");
  }
}

}  // namespace bertrt::cuda

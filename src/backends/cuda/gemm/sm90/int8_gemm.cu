// The engine's instance of sm90/int8_gemm.cuh (see int8_gemm.h).
#include "backends/cuda/gemm/sm90/int8_gemm.cuh"

namespace bertrt::cuda {
namespace {

// 128 x 128 tiles 128 deep (a 128-byte row of int8 per k-block, the TMA's
// widest swizzle), ping-pong, clusters of 2 along N: the FP8 GEMM's tiling
// (bias_gelu_gemm.cu); not yet timed against others.
template <bool kResidual>
using EngineKernel = sm90::Int8GemmKernel<
    cutlass::half_t, cute::Shape<cute::_128, cute::_128, cute::_128>,
    cute::Shape<cute::_1, cute::_2, cute::_1>, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
    cutlass::epilogue::TmaWarpSpecialized, kResidual>;

}  // namespace

bool Int8GemmBuilt() { return true; }

Status Int8Gemm(Precision p, const Int8GemmArgs& a, cudaStream_t stream) {
  if (p != Precision::kFp16) return InvalidArgument("Int8Gemm: fp16 only");
  if (a.in % 16 || a.out % 16)
    return InvalidArgument("Int8Gemm: in and out must be multiples of 16");
  // |sum_k (x - zero) w| <= 255 * 127 * in must stay below 2^31.
  if (a.in > 65536) return InvalidArgument("Int8Gemm: in must be at most 65,536");
  if (a.residual && a.gelu) return InvalidArgument("Int8Gemm: a residual or the GELU, not both");
  if (a.rows == 0) return Status::Ok();
  if (a.residual) return EngineKernel<true>::Run(a, stream);
  return EngineKernel<false>::Run(a, stream);
}

}  // namespace bertrt::cuda

// The engine's instance of sm90/int8_gemm.cuh (see int8_gemm.h).
#include <cstdlib>
#include <string>

#include "backends/cuda/gemm/sm90/int8_gemm.cuh"

namespace bertrt::cuda {
namespace {

// The tilings timed against each other (bench/probes/int8_gemm_probe.cu;
// BERTRT_INT8_GEMM_TILING picks one for the engine-level A/B of
// bench/fp8_bench.py until one is chosen): 128 x 128 tiles 128 deep (a
// 128-byte row of int8 per k-block, the TMA's widest swizzle), ping-pong,
// clusters of 2 along N (the default, the FP8 GEMM's former tiling); 256 x
// 128 and 128 x 256 tiles shared by both warpgroups (cooperative).
using Tile128 = cute::Shape<cute::_128, cute::_128, cute::_128>;
using Tile256x128 = cute::Shape<cute::_256, cute::_128, cute::_128>;
using Tile128x256 = cute::Shape<cute::_128, cute::_256, cute::_128>;
template <class Tile, class Cluster, class Schedule, class Epilogue, bool kResidual>
using Kernel = sm90::Int8GemmKernel<cutlass::half_t, Tile, Cluster, Schedule, Epilogue, kResidual>;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingEpilogue = cutlass::epilogue::TmaWarpSpecialized;
using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
using C1x2 = cute::Shape<cute::_1, cute::_2, cute::_1>;
using C2x1 = cute::Shape<cute::_2, cute::_1, cute::_1>;

template <bool kResidual>
Status RunTiling(const Int8GemmArgs& a, cudaStream_t stream) {
  static const std::string tiling = [] {
    const char* v = std::getenv("BERTRT_INT8_GEMM_TILING");
    return std::string(v ? v : "");
  }();
  if (tiling == "coop256x128")
    return Kernel<Tile256x128, C2x1, Coop, CoopEpilogue, kResidual>::Run(a, stream);
  if (tiling == "coop128x256")
    return Kernel<Tile128x256, C1x2, Coop, CoopEpilogue, kResidual>::Run(a, stream);
  return Kernel<Tile128, C1x2, Ping, PingEpilogue, kResidual>::Run(a, stream);
}

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
  if (a.residual) return RunTiling<true>(a, stream);
  return RunTiling<false>(a, stream);
}

}  // namespace bertrt::cuda

// The engine's instance of sm90/int8_gemm.cuh (see int8_gemm.h).
#include "backends/cuda/gemm/sm90/int8_gemm.cuh"

namespace bertrt::cuda {
namespace {

// From this many rows, 256 x 128 tiles 128 deep (a 128-byte row of int8 per
// k-block, the TMA's widest swizzle) shared by both consumer warpgroups
// (cooperative), clusters of 2 along M; below, 128 x 128 tiles, each
// warpgroup its own (ping-pong), clusters of 2 along N. Of the six tilings
// bench/probes/int8_gemm_probe.cu timed on the H200 (bench/RESULTS.md,
// 2026-12-06) at BERT-base b128 (16,384 rows) the cooperative one was the
// fastest at QKV and FFN-in (with the erf GELU) and at BERT-large's FFN-in,
// within 2% at the attention output and 13% behind ping-pong at FFN-out
// (1.09x, 1.24x, 0.91x, 1.61x cuBLASLt's fp16 GEMM; ping-pong's FFN-in
// 0.65x): the int8 forward 6.70 ms against 7.38. At batch 1 (128 rows) its
// 256-row tiles are half empty and ping-pong's forward was faster (0.90 ms
// against 1.11). The cut between is not measured yet.
constexpr int kCooperativeMinRows = 2048;

template <class Tile, class Cluster, class Schedule, class Epilogue, bool kResidual>
using Kernel = sm90::Int8GemmKernel<cutlass::half_t, Tile, Cluster, Schedule, Epilogue, kResidual>;

template <bool kResidual>
Status RunEngineKernel(const Int8GemmArgs& a, cudaStream_t stream) {
  using cute::_1, cute::_2, cute::_128, cute::_256;
  if (a.rows >= kCooperativeMinRows)
    return Kernel<cute::Shape<_256, _128, _128>, cute::Shape<_2, _1, _1>,
                  cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                  cutlass::epilogue::TmaWarpSpecializedCooperative, kResidual>::Run(a, stream);
  return Kernel<cute::Shape<_128, _128, _128>, cute::Shape<_1, _2, _1>,
                cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                cutlass::epilogue::TmaWarpSpecialized, kResidual>::Run(a, stream);
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
  if (a.residual) return RunEngineKernel<true>(a, stream);
  return RunEngineKernel<false>(a, stream);
}

}  // namespace bertrt::cuda

// CUTLASS's sm90 int8 GEMM of the int8 engine (int8_gemm.h), templated on
// the tiling so that bench/probes/int8_gemm_probe.cu can time the candidates
// the engine chose from. The layout of BiasGeluGemmKernel
// (bias_gelu_gemm.cuh): x is A (uint8, row-major), W is B (int8,
// column-major K x N, HF's [out, in]), y is D. Compiled for sm_90a alone.
#pragma once

#include "backends/cuda/gemm/int8_gemm.h"
#include "backends/cuda/gemm/sm90/bias_gelu_gemm.cuh"

namespace bertrt::cuda::sm90 {

using cutlass::epilogue::fusion::Sm90AccFetch;
using cutlass::epilogue::fusion::Sm90ColBroadcast;
using cutlass::epilogue::fusion::Sm90Compute;
using cutlass::epilogue::fusion::Sm90EVT;
using cutlass::epilogue::fusion::Sm90RowBroadcast;
using cutlass::epilogue::fusion::Sm90SrcFetch;
inline constexpr auto kNearest = cutlass::FloatRoundStyle::round_to_nearest;

// acc - zero[row] * weight_sum[column] in 32-bit integers: the products of
// the centred input (x - zero) with the weights, exact. (Wrapping unsigned
// arithmetic: each term may pass 2^31 on the way for very wide inputs where
// the result does not; Int8Gemm bounds `in` so that the result never does.)
template <class A>
struct Centered {
  template <class V>
  CUTLASS_DEVICE V operator()(V const& acc, V const& zero, V const& sum) const {
    V y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < int(V::kElements); ++i)
      y[i] = int32_t(uint32_t(acc[i]) - uint32_t(zero[i]) * uint32_t(sum[i]));
    return y;
  }
};

// The output: T(centred * weight_scale * row_scale + bias), then, where
// asked, T(erf GELU of that): each rounding where the CPU's int8 GEMM and
// the fp16 engine's activation kernel would make it.
struct Int8OutArguments {
  bool gelu = false;
};

template <class T>
struct Int8OutOf {
  template <class A>
  struct Fn {
    using Arguments = Int8OutArguments;
    template <class V>
    CUTLASS_DEVICE V operator()(V const& centered, V const& weight_scale, V const& row_scale,
                                V const& bias, Arguments const& a) const {
      V y;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < int(V::kElements); ++i) {
        const float v = float(T(fmaf(centered[i] * weight_scale[i], row_scale[i], bias[i])));
        y[i] = a.gelu ? float(T(ErfGelu(v))) : v;
      }
      return y;
    }
  };
};

// The same plus the residual (C), added in fp32 before the rounding to T.
template <class A>
struct Int8OutResidual {
  template <class V>
  CUTLASS_DEVICE V operator()(V const& centered, V const& weight_scale, V const& row_scale,
                              V const& bias, V const& residual) const {
    V y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < int(V::kElements); ++i)
      y[i] = fmaf(centered[i] * weight_scale[i], row_scale[i], bias[i]) + residual[i];
    return y;
  }
};

// y[rows, out] from x (uint8), W (int8) and the vectors of Int8GemmArgs;
// kResidual: + residual (C, row-major like D), no GELU.
template <class T, class TileShape, class ClusterShape, class MainloopSchedule,
          class EpilogueSchedule, bool kResidual>
struct Int8GemmKernel {
  static constexpr int kAlignment = 16;  // elements: 16 bytes of int8
  static constexpr int kOutAlignment = 8;  // 16 bytes of T
  using ElementC = std::conditional_t<kResidual, T, void>;
  // Per row of D (M): the row's zero point and scale; per column (N): the
  // weights' sum and scale, and the bias.
  using RowZero = Sm90ColBroadcast<0, TileShape, int32_t, int32_t,
                                   cute::Stride<cute::_1, cute::_0, int64_t>, 1>;
  using RowScale = Sm90ColBroadcast<0, TileShape, float, float,
                                    cute::Stride<cute::_1, cute::_0, int64_t>, 1>;
  using WeightSum = Sm90RowBroadcast<0, TileShape, int32_t, int32_t,
                                     cute::Stride<cute::_0, cute::_1, int64_t>, 4>;
  using WeightScale = Sm90RowBroadcast<0, TileShape, float, float,
                                       cute::Stride<cute::_0, cute::_1, int64_t>, 4>;
  using Bias = Sm90RowBroadcast<0, TileShape, T, float, cute::Stride<cute::_0, cute::_1, int64_t>,
                                kOutAlignment>;
  using CenteredAcc =
      Sm90EVT<Sm90Compute<Centered, int32_t, int32_t, kNearest>, Sm90AccFetch, RowZero, WeightSum>;
  using Fusion = std::conditional_t<
      kResidual,
      Sm90EVT<Sm90Compute<Int8OutResidual, T, float, kNearest>, CenteredAcc, WeightScale,
              RowScale, Bias, Sm90SrcFetch<T>>,
      Sm90EVT<Sm90Compute<Int8OutOf<T>::template Fn, T, float, kNearest>, CenteredAcc,
              WeightScale, RowScale, Bias>>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, float, ElementC,
      cutlass::layout::RowMajor, kOutAlignment, T, cutlass::layout::RowMajor, kOutAlignment,
      EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, uint8_t, cutlass::layout::RowMajor,
      kAlignment, int8_t, cutlass::layout::ColumnMajor, kAlignment, int32_t, TileShape,
      ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;

  static Status Run(const Int8GemmArgs& a, cudaStream_t stream) {
    typename Kernel::Arguments args =
        GemmArguments<Kernel>(a.x, a.w, a.residual, a.y, a.rows, a.out, a.in);
    // The tree's arguments, children first: the centred accumulators (the
    // accumulators, the rows' zero points, the weights' sums), the weights'
    // scales, the rows' scales, the bias (0 where none is given), [the
    // residual,] then the output's own.
    const typename CenteredAcc::Arguments centered{
        {}, {a.row_zeros, 0, {}}, {a.weight_sums, 0, {}}, {}};
    const typename WeightScale::Arguments weight_scale{a.weight_scales, 0.0f, {}};
    const typename RowScale::Arguments row_scale{a.row_scales, 0.0f, {}};
    const typename Bias::Arguments bias{static_cast<const T*>(a.bias), T(0), {}};
    if constexpr (kResidual)
      args.epilogue.thread = {centered, weight_scale, row_scale, bias, {}, {}};
    else
      args.epilogue.thread = {centered, weight_scale, row_scale, bias, {a.gelu}};
    return Launch<Kernel>(args, a.sm_count, "Int8Gemm", stream);
  }
};

}  // namespace bertrt::cuda::sm90

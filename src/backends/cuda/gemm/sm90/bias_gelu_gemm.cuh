// CUTLASS's sm90 GEMM with a bias + erf GELU epilogue (bias_gelu_gemm.h),
// templated on the tiling so that bench/probes/bias_gelu_gemm_probe.cu and
// power_cap_gemm_probe.cu can time the candidates the engine chose from.
// Compiled for sm_90a alone.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <type_traits>

#include "backends/cuda/gemm/bias_gelu_gemm.h"
#include "backends/cuda/gemm/gelu_erf.h"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace bertrt::cuda::sm90 {

// An elementwise activation F (F<float>::Act) over a CUTLASS fragment, as
// the epilogue calls it.
template <template <class> class F, class A>
CUTLASS_DEVICE A ApplyToFragment(A const& v) {
  A y;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < int(A::kElements); ++i)
    y[i] = typename A::Element(F<float>::Act(float(v[i])));
  return y;
}

// The erf GELU (ErfGelu: gelu_erf.h says how and why this form). Why not
// erff: this epilogue runs once per output element while the tensor cores
// wait (K is only 768 deep at BERT-base), and erff's two polynomial ranges and
// exp cost as much as the GEMM's tail (bench/RESULTS.md, 2026-12-01, "The erf
// GELU in the GEMM's epilogue").
template <class T>
struct GeluErf {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE static float Act(float x) { return ErfGelu(x); }
  CUTLASS_DEVICE T operator()(T const& v) const { return T(Act(float(v))); }
};

template <class T, int N>
struct GeluErf<cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& v) const {
    return ApplyToFragment<sm90::GeluErf>(v);
  }
};

// Runs CUTLASS kernel `Kernel` (a GemmUniversal) with `args` on `stream`
// across `sm_count` multiprocessors; `name` for the errors.
template <class Kernel>
Status Launch(typename Kernel::Arguments& args, int sm_count, const char* name,
              cudaStream_t stream) {
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  const auto& problem = args.problem_shape;
  args.hw_info.device_id = 0;
  args.hw_info.sm_count = sm_count;
  if (Kernel::get_workspace_size(args) != 0)
    return Internal(std::string(name) +
                    ": this tiling asks for a workspace, which the engine has none of");
  if (Gemm::can_implement(args) != cutlass::Status::kSuccess)
    return InvalidArgument(std::string(name) + ": CUTLASS cannot take " +
                           std::to_string(cute::get<0>(problem)) + " x " +
                           std::to_string(cute::get<2>(problem)) + " -> " +
                           std::to_string(cute::get<1>(problem)));
  // The kernel's shared memory is above the 48 KB default: allowed once,
  // outside any stream capture's concern.
  static std::once_flag smem_set;
  static cudaError_t smem_err = cudaSuccess;
  std::call_once(smem_set, [] {
    const int smem = int(Kernel::SharedStorageSize);
    if (smem >= (48 << 10))
      smem_err = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  });
  if (smem_err != cudaSuccess)
    return Internal(std::string(name) + ": cudaFuncSetAttribute: " + cudaGetErrorString(smem_err));
  typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
  if (Gemm::run(params, stream) != cutlass::Status::kSuccess) {
    const cudaError_t err = cudaGetLastError();
    return Internal(std::string(name) + ": launch failed: " + cudaGetErrorString(err));
  }
  return Status::Ok();
}

// A GemmUniversal's arguments for y[m, n] from x[m, k], w[n, k] (HF's [out,
// in]: column-major K x N to CUTLASS) and, where the epilogue reads one,
// c[m, n] (null otherwise); x, c and y row-major. The epilogue's own
// arguments (`thread`) are the caller's.
template <class Kernel>
typename Kernel::Arguments GemmArguments(const void* x, const void* w, const void* c, void* y,
                                         int m, int n, int k) {
  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = typename Kernel::ProblemShape{m, n, k, 1};
  auto& in = args.mainloop;
  in.ptr_A = static_cast<decltype(in.ptr_A)>(x);
  in.dA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, {m, k, 1});
  in.ptr_B = static_cast<decltype(in.ptr_B)>(w);
  in.dB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {n, k, 1});
  auto& out = args.epilogue;
  out.ptr_C = static_cast<decltype(out.ptr_C)>(c);
  out.dC = cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, {m, n, 1});
  out.ptr_D = static_cast<decltype(out.ptr_D)>(y);
  out.dD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, {m, n, 1});
  return args;
}

// y[rows, out] = act(x[rows, in] W[out, in]^T + bias[out] [+ residual[rows,
// out]]). In CUTLASS's terms M = rows, N = out, K = in; x is A, row-major
// (M x K); W is B, column-major (K x N: element (k, n) at n * K + k, HF's
// [out, in]); y is D, row-major; the bias is per column of D; the residual,
// where kResidual, is C (beta = 1), row-major like D. `Act`: GeluErf; the
// probes also time CUTLASS's erff GELU and Identity.
template <class T, class TileShape, class ClusterShape, class MainloopSchedule,
          class EpilogueSchedule, template <class> class Act = GeluErf, bool kResidual = false>
struct BiasGeluGemmKernel {
  static constexpr int kAlignment = 8;  // elements: 16 bytes of fp16/bf16
  using ElementC = std::conditional_t<kResidual, T, void>;
  // With a residual, CUTLASS's beta C + (alpha acc + bias) and Act; without,
  // Act(acc + bias): one add per element where LinCombPerColBiasEltAct would
  // take two fmas (alpha and beta are runtime values, so the compiler cannot
  // drop beta times a C of zeros), and at the power cap each instruction per
  // output element costs speed across the forward (gelu_erf.h).
  using BiasAct = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<Act, T, float,
                                             cutlass::FloatRoundStyle::round_to_nearest>,
      cutlass::epilogue::fusion::Sm90EVT<
          cutlass::epilogue::fusion::Sm90Compute<cutlass::plus, float, float,
                                                 cutlass::FloatRoundStyle::round_to_nearest>,
          cutlass::epilogue::fusion::Sm90AccFetch,
          cutlass::epilogue::fusion::Sm90RowBroadcast<
              0, TileShape, T, float, cute::Stride<cute::_0, cute::_1, int64_t>, kAlignment>>>;
  using Fusion = std::conditional_t<
      kResidual, cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, T, float, T, T, float>,
      BiasAct>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC,
      cutlass::layout::RowMajor, kAlignment, T, cutlass::layout::RowMajor, kAlignment,
      EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, kAlignment,
      T, cutlass::layout::ColumnMajor, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static Status Run(const BiasGeluGemmArgs& a, cudaStream_t stream) {
    if (kResidual != (a.residual != nullptr))
      return Internal(kResidual ? "BiasGeluGemm: this kernel adds a residual, and none was given"
                                : "BiasGeluGemm: this kernel adds no residual");
    // (The residual null without kResidual.)
    typename Kernel::Arguments args =
        GemmArguments<Kernel>(a.x, a.w, a.residual, a.y, a.rows, a.out, a.in);
    if constexpr (kResidual) {
      args.epilogue.thread.alpha = 1.0f;
      args.epilogue.thread.beta = 1.0f;
      args.epilogue.thread.bias_ptr = static_cast<const T*>(a.bias);
    } else {
      // The tree's arguments, children first: Act's argument acc + bias (the
      // accumulators; the bias row, 0 where none is given; the add), then
      // Act's own (none).
      args.epilogue.thread = {{{}, {static_cast<const T*>(a.bias), T(0), {}}, {}}, {}};
    }
    return Launch<Kernel>(args, a.sm_count, "BiasGeluGemm", stream);
  }
};

}  // namespace bertrt::cuda::sm90

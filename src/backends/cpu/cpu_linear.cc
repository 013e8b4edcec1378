#include "backends/cpu/cpu_linear.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

namespace bertrt::cpu {

using dnnl::memory;
using Tag = memory::format_tag;
using DType = memory::data_type;

namespace {

// The row count whose kernel picks the weights layout made at creation: a
// 128-token sequence, the common case. Kernels choose blocking from N and K,
// so other row counts normally read the same copy.
constexpr int kReferenceRows = 128;

Status DnnlError(const char* what, const dnnl::error& e) {
  return Internal(std::string("cpu engine: oneDNN ") + what + " failed: " + e.what());
}

// The post-ops of `e` on an [m, n] output; a residual apart from c is a
// binary add of a tensor of c's shape.
dnnl::primitive_attr AttrFor(Epilogue e, bool residual_apart, int m, int n) {
  dnnl::post_ops ops;
  switch (e) {
    case Epilogue::kNone: break;
    case Epilogue::kGelu:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    case Epilogue::kGeluTanh:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      break;
    case Epilogue::kRelu: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); break;
    case Epilogue::kResidual:
      if (residual_apart)
        ops.append_binary(dnnl::algorithm::binary_add,
                          memory::desc({m, n}, memory::data_type::f32, memory::format_tag::ab));
      else
        ops.append_sum(1.0f);
      break;
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  // Strict is the default; spelled out because exactness depends on it.
  attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
  return attr;
}

dnnl::matmul::primitive_desc MakeDesc(int m, int k, int n, Epilogue e, bool residual_apart,
                                      const memory::desc& w, const dnnl::engine& engine) {
  const memory::desc a({m, k}, DType::f32, Tag::ab), b({1, n}, DType::f32, Tag::ab),
      c({m, n}, DType::f32, Tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, w, b, c),
                                      AttrFor(e, residual_apart, m, n), engine);
}

bool IsReference(const dnnl::matmul::primitive_desc& pd) {
  return std::strncmp(pd.impl_info_str(), "ref", 3) == 0;
}

}  // namespace

Status MatmulContext::Init() {
  try {
    engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    stream_ = dnnl::stream(engine_);
  } catch (const dnnl::error& err) {
    return DnnlError("engine creation", err);
  }
  return Status::Ok();
}

StatusOr<const MatmulContext::Prim*> MatmulContext::Get(int m, int k, int n, Epilogue e,
                                                        bool residual_apart,
                                                        const memory::desc& preferred) {
  residual_apart = residual_apart && e == Epilogue::kResidual;
  const auto key = std::make_tuple(m, k, n, static_cast<int>(e), residual_apart);
  auto it = prims_.find(key);
  if (it != prims_.end()) return &it->second;
  // Serving sees many distinct token counts; a bounded cache keeps memory
  // flat (oneDNN's own primitive cache makes a re-creation cheap).
  if (prims_.size() >= 256) prims_.clear();
  try {
    // The layout already reordered is tried first; a row count whose fast
    // kernel needs another blocking gets its own (reordered on first use)
    // rather than falling back to the slow reference kernel.
    dnnl::matmul::primitive_desc pd = MakeDesc(m, k, n, e, residual_apart, preferred, engine_);
    if (IsReference(pd))
      pd = MakeDesc(m, k, n, e, residual_apart, memory::desc({k, n}, DType::f32, Tag::any),
                    engine_);
    Prim prim{dnnl::matmul(pd), pd.weights_desc()};
    return &prims_.emplace(key, std::move(prim)).first->second;
  } catch (const dnnl::error& err) {
    return DnnlError("matmul creation", err);
  }
}

StatusOr<Linear> Linear::Create(PackedLinear packed, MatmulContext* ctx, Kernel kernel) {
  Linear l;
  l.bias_.assign(packed.b, packed.b + packed.out);
  l.packed_ = std::move(packed);
  const int k = l.packed_.in, n = l.packed_.out;
  try {
    // W is [out, in] row-major, i.e. the [K, N] matrix in column-major (ba).
    const dnnl::matmul::primitive_desc pd =
        MakeDesc(kReferenceRows, k, n, Epilogue::kNone, false,
                 memory::desc({k, n}, DType::f32, Tag::any), ctx->engine());
    if (kernel == Kernel::kAuto)
      kernel = std::strncmp(pd.impl_info_str(), "brg", 3) == 0 ? Kernel::kMatmul : Kernel::kSgemm;
    l.kernel_ = kernel;
    if (kernel == Kernel::kSgemm) return l;
    memory src({{k, n}, DType::f32, Tag::ba}, ctx->engine(), const_cast<float*>(l.packed_.w));
    memory dst(pd.weights_desc(), ctx->engine());
    dnnl::reorder(src, dst).execute(ctx->stream(), src, dst);
    ctx->stream().wait();
    l.weights_.emplace_back(pd.weights_desc(), std::move(dst));
  } catch (const dnnl::error& err) {
    return DnnlError("weight reorder", err);
  }
  l.packed_.w = nullptr;
  l.packed_.b = nullptr;
  l.packed_.owned = {};
  return l;
}

StatusOr<memory> Linear::WeightsIn(const memory::desc& layout, MatmulContext* ctx) const {
  for (const auto& [desc, mem] : weights_)
    if (desc == layout) return mem;
  try {
    memory dst(layout, ctx->engine());
    dnnl::reorder(weights_[0].second, dst).execute(ctx->stream(), weights_[0].second, dst);
    weights_.emplace_back(layout, dst);
    return dst;
  } catch (const dnnl::error& err) {
    return DnnlError("weight reorder", err);
  }
}

Status Linear::Run(const float* a, int m, float* c, MatmulContext* ctx, int threads,
                   Epilogue epilogue, const float* residual) const {
  if (m <= 0 || packed_.out == 0) return Status::Ok();
  if ((epilogue == Epilogue::kResidual) != (residual != nullptr))
    return Internal("cpu engine: a Linear's residual comes with the residual epilogue alone");
  if (kernel_ == Kernel::kMatmul) return RunMatmul(a, m, c, ctx, epilogue, residual);
  RunSgemm(a, m, c, threads, epilogue, residual);
  return Status::Ok();
}

namespace {

// Column chunks are multiples of 16 so every thread's slice starts on a
// vector boundary of the output.
void SplitColumns(int n, int threads, int t, int* begin, int* end) {
  int blocks = (n + 15) / 16;
  int per = blocks / threads, extra = blocks % threads;
  int b0 = t * per + std::min(t, extra);
  int b1 = b0 + per + (t < extra ? 1 : 0);
  *begin = std::min(n, b0 * 16);
  *end = std::min(n, b1 * 16);
}

Act ActOf(Epilogue e) {
  switch (e) {
    case Epilogue::kGelu: return Act::kGelu;
    case Epilogue::kGeluTanh: return Act::kGeluTanh;
    case Epilogue::kRelu: return Act::kRelu;
    case Epilogue::kNone:
    case Epilogue::kResidual: break;
  }
  return Act::kNone;
}

}  // namespace

void Linear::RunSgemm(const float* a, int m, float* c, int threads, Epilogue epilogue,
                      const float* residual) const {
  const PackedLinear& w = packed_;
  // sgemm adds into c (beta 1): the residual goes there first.
  if (residual && residual != c) std::copy(residual, residual + size_t(m) * w.out, c);
  // The parallel split over output columns is ours and each oneDNN call runs
  // on one thread: measured on 2-thread Xeon and EPYC boxes it is as fast as
  // oneDNN's own threading and never splits the K sum across threads. oneDNN
  // still picks its kernel by m, so a row batched with others can round
  // differently (~1e-7 relative) from the same row alone. oneDNN does not
  // nest inside an active region; the thread-count override covers the
  // one-thread (inactive) case.
  const int nt = std::max(1, std::min(threads, (w.out + 15) / 16));
  const float beta = residual ? 1.0f : 0.0f;
#pragma omp parallel num_threads(nt)
  {
    omp_set_num_threads(1);
    int t = omp_get_thread_num(), n0 = 0, n1 = w.out;
    SplitColumns(w.out, nt, t, &n0, &n1);
    if (n1 > n0)
      dnnl_sgemm('N', 'T', m, n1 - n0, w.in, 1.0f, a, w.in, w.w + static_cast<size_t>(n0) * w.in,
                 w.in, beta, c + n0, w.out);
  }
  BiasAct(c, m, w.out, bias_.data(), ActOf(epilogue), threads);
}

Status Linear::RunMatmul(const float* a, int m, float* c, MatmulContext* ctx, Epilogue epilogue,
                         const float* residual) const {
  const int in = packed_.in, out = packed_.out;
  const bool apart = residual && residual != c;
  ASSIGN_OR_RETURN(const MatmulContext::Prim* prim,
                   ctx->Get(m, in, out, epilogue, apart, weights_[0].first));
  ASSIGN_OR_RETURN(memory w, WeightsIn(prim->weights, ctx));
  try {
    const dnnl::engine& eng = ctx->engine();
    memory src({{m, in}, DType::f32, Tag::ab}, eng, const_cast<float*>(a));
    memory bias({{1, out}, DType::f32, Tag::ab}, eng, const_cast<float*>(bias_.data()));
    memory dst({{m, out}, DType::f32, Tag::ab}, eng, c);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    if (apart)
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   memory({{m, out}, DType::f32, Tag::ab}, eng, const_cast<float*>(residual)));
    prim->matmul.execute(ctx->stream(), args);
    ctx->stream().wait();
  } catch (const dnnl::error& err) {
    return DnnlError("matmul", err);
  }
  return Status::Ok();
}

}  // namespace bertrt::cpu

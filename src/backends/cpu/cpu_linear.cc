#include "backends/cpu/cpu_linear.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/half.h"

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

// Runs `matmul` on the [m, k] input `a` (of `type`) into c [m, n] in fp32,
// with `bias` [n] (null: the primitive has none) and a residual apart from c
// (the binary-add post-op's tensor; null: none).
Status Execute(MatmulContext* ctx, const dnnl::matmul& matmul, const memory& weights,
               const void* a, DType type, int m, int k, int n, const float* bias, float* c,
               const float* residual_apart, const char* what) {
  try {
    const dnnl::engine& eng = ctx->engine();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory({{m, k}, type, Tag::ab}, eng, const_cast<void*>(a))},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_DST, memory({{m, n}, DType::f32, Tag::ab}, eng, c)}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS,
                   memory({{1, n}, DType::f32, Tag::ab}, eng, const_cast<float*>(bias)));
    if (residual_apart)
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   memory({{m, n}, DType::f32, Tag::ab}, eng, const_cast<float*>(residual_apart)));
    matmul.execute(ctx->stream(), args);
    ctx->stream().wait();
  } catch (const dnnl::error& err) {
    return DnnlError(what, err);
  }
  return Status::Ok();
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

// Rounds to nearest, ties to even, and clamps to the symmetric int8 range.
inline int8_t QuantizeValue(float x) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(x), -127.0f, 127.0f));
}

// The row quantizers of the int8 GEMMs' inputs, in AVX2 (the build's floor,
// x86-64-v3: GCC leaves the scalar forms' min/max, rounding and clamps
// scalar, a quarter of an int8 forward). Each computes exactly what the
// scalar expression beside it does: the same products in the same order,
// rounding to nearest even, the same clamps.

// Eight int32 vectors' worth of values (already clamped to the byte type's
// range) packed in order into 32 bytes, signed or unsigned.
template <bool kSigned>
inline void StoreBytes(__m256i a, __m256i b, __m256i c, __m256i d, void* out) {
  const __m256i ab = kSigned ? _mm256_packs_epi32(a, b) : _mm256_packus_epi32(a, b);
  const __m256i cd = kSigned ? _mm256_packs_epi32(c, d) : _mm256_packus_epi32(c, d);
  const __m256i bytes = kSigned ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
  // The packs work per 128-bit lane: dword j of `bytes` holds four values of
  // a, b, c or d (j % 4), their first four in lane 0 (j < 4), their last four
  // in lane 1; the permutation puts them back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(static_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(bytes, order));
}

// The smallest and largest of x[k] * mult[k] and 0.
inline void RowRange(const float* x, const float* mult, int n, float* lo, float* hi) {
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(mult + k));
    vlo = _mm256_min_ps(vlo, v);
    vhi = _mm256_max_ps(vhi, v);
  }
  float l[8], h[8];
  _mm256_storeu_ps(l, vlo);
  _mm256_storeu_ps(h, vhi);
  *lo = *std::min_element(l, l + 8);
  *hi = *std::max_element(h, h + 8);
  for (; k < n; ++k) {
    const float v = x[k] * mult[k];
    *lo = std::min(*lo, v), *hi = std::max(*hi, v);
  }
}

// out[k] = clamp(nearbyint(x[k] * mult[k] * inverse) + zero, lo, hi): uint8
// per token (lo 0, hi 255), int8 per tensor (inverse 1, zero 0, +-127).
template <bool kSigned>
inline void QuantizeRow(const float* x, const float* mult, float inverse, float zero, int n,
                        void* out) {
  constexpr float kLo = kSigned ? -127.0f : 0.0f, kHi = kSigned ? 127.0f : 255.0f;
  const __m256 vinv = _mm256_set1_ps(inverse), vzero = _mm256_set1_ps(zero),
               vlo = _mm256_set1_ps(kLo), vhi = _mm256_set1_ps(kHi);
  auto one = [&](int k) {
    __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(mult + k)), vinv);
    v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vzero);
    return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, vlo), vhi));
  };
  auto* bytes = static_cast<uint8_t*>(out);
  int k = 0;
  for (; k + 32 <= n; k += 32)
    StoreBytes<kSigned>(one(k), one(k + 8), one(k + 16), one(k + 24), bytes + k);
  for (; k < n; ++k) {
    const float v = std::clamp(std::nearbyint(x[k] * mult[k] * inverse) + zero, kLo, kHi);
    if (kSigned) reinterpret_cast<int8_t*>(bytes)[k] = static_cast<int8_t>(v);
    else bytes[k] = static_cast<uint8_t>(v);
  }
}

// A tensor owning `data`.
template <class T>
Tensor Owned(bertrt::DType dtype, std::vector<int64_t> shape, std::vector<T> data) {
  auto holder = std::make_shared<std::vector<T>>(std::move(data));
  return Tensor(dtype, std::move(shape), holder->data(), holder);
}

// Whether `q` are an 8-bit GEMM's operands for `out` outputs (they may come
// from a plan: its reader checks them too): int8 weights with a scale per
// output row, or fp8 weights with one scale, whose input has a scale.
Status CheckOperands(const QuantizedLinear& q, int out) {
  const Tensor &w = q.weights, &scales = q.scales, &smoothing = q.smoothing;
  const bool fp8 = w.dtype() == bertrt::DType::kF8E4M3;
  if ((w.dtype() != bertrt::DType::kI8 && !fp8) || w.rank() != 2 || w.dim(0) != out ||
      w.dim(1) <= 0 || scales.dtype() != bertrt::DType::kF32 || scales.rank() != 1 ||
      scales.dim(0) != (fp8 ? 1 : out) || smoothing.dtype() != bertrt::DType::kF32 ||
      smoothing.rank() != 1 || smoothing.dim(0) != w.dim(1))
    return InvalidArgument("cpu engine: 8-bit Linear operands of the wrong types or shapes");
  auto positive = [](const Tensor& t) {
    return std::all_of(t.f32(), t.f32() + t.numel(),
                       [](float v) { return std::isfinite(v) && v > 0.0f; });
  };
  if (!positive(scales) || !positive(smoothing) || !std::isfinite(q.input_scale) ||
      q.input_scale < 0.0f || (fp8 && q.input_scale == 0.0f))
    return InvalidArgument(
        "cpu engine: 8-bit Linear scales and smoothing must be finite and positive, the input "
        "scale finite and not negative (positive for fp8)");
  return Status::Ok();
}

// The input is in the weights' type (f32, or bf16 for Linear::UseBf16); the
// output, bias and post-ops' tensors are f32.
dnnl::matmul::primitive_desc MakeDesc(int m, int k, int n, Epilogue e, bool residual_apart,
                                      const memory::desc& w, const dnnl::engine& engine) {
  const memory::desc a({m, k}, w.data_type(), Tag::ab), b({1, n}, DType::f32, Tag::ab),
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
  const DType type = preferred.data_type();
  const auto key = std::make_tuple(m, k, n, static_cast<int>(e), residual_apart, type);
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
      pd = MakeDesc(m, k, n, e, residual_apart, memory::desc({k, n}, type, Tag::any), engine_);
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

// An 8-bit GEMM with its operands (see cpu_linear.h).
class QuantizedGemm {
 public:
  virtual ~QuantizedGemm() = default;
  virtual Status Run(const float* a, int m, float* c, Epilogue epilogue, const float* residual,
                     MatmulContext* ctx, int threads) const = 0;
  const QuantizedLinear& operands() const { return operands_; }
  int in() const { return static_cast<int>(operands_.weights.dim(1)); }
  int out() const { return static_cast<int>(operands_.weights.dim(0)); }

 protected:
  QuantizedLinear operands_;  // kept: its tensors may be views of a plan
};

// The int8 GEMM. oneDNN (2.x) computes
// dst = output_scale[n] * (sum_k a_q[m, k] w_q[k, n] + bias[n]) and then the
// post-ops, so the bias it is given is divided by the output scale.
class Int8Gemm final : public QuantizedGemm {
 public:
  // The operands of `w` ([out, in] fp32, bias apart): each input column
  // multiplied by its `smoothing` divisor (empty: 1), then each row
  // symmetric onto [-127, 127].
  static QuantizedLinear Quantize(std::vector<float> w, int in, int out,
                             const std::vector<float>& smoothing, float input_scale) {
    std::vector<float> divisors = smoothing;
    if (divisors.size() != size_t(in)) divisors.assign(in, 1.0f);
    std::vector<int8_t> q(size_t(in) * out);
    std::vector<float> scales(out);
    for (int n = 0; n < out; ++n) {
      float* row = w.data() + size_t(n) * in;
      float max = 0.0f;
      for (int k = 0; k < in; ++k) max = std::max(max, std::abs(row[k] *= divisors[k]));
      scales[n] = max > 0.0f ? max / 127.0f : 1.0f;
      for (int k = 0; k < in; ++k) q[size_t(n) * in + k] = QuantizeValue(row[k] / scales[n]);
    }
    QuantizedLinear l;
    l.weights = Owned(bertrt::DType::kI8, {out, in}, std::move(q));
    l.scales = Owned(bertrt::DType::kF32, {out}, std::move(scales));
    l.smoothing = Owned(bertrt::DType::kF32, {in}, std::move(divisors));
    l.input_scale = input_scale;
    return l;
  }

  // The GEMM on `q`'s operands (kept: its tensors may be views of a plan).
  static StatusOr<std::shared_ptr<const QuantizedGemm>> Create(QuantizedLinear q,
                                                               const std::vector<float>& bias,
                                                               MatmulContext* ctx) {
    auto g = std::make_shared<Int8Gemm>();
    const int in = static_cast<int>(q.weights.dim(1)), out = static_cast<int>(q.weights.dim(0));
    g->in_ = in;
    g->out_ = out;
    // 0: each row's own scale, found as it is quantized (per token).
    g->per_token_ = q.input_scale == 0.0f;
    const float input_scale = g->per_token_ ? 1.0f : q.input_scale;
    g->input_multipliers_ = Int8InputMultipliers(q);
    const std::vector<int32_t> sums = Int8WeightSums(q);
    const float* scales = q.scales.f32();
    g->output_scales_.resize(out);
    g->column_sums_.resize(out);
    g->bias_.resize(out);
    for (int n = 0; n < out; ++n) {
      g->column_sums_[n] = static_cast<float>(sums[n]) * scales[n];
      g->output_scales_[n] = input_scale * scales[n];
      g->bias_[n] = g->per_token_ ? bias[n] : bias[n] / g->output_scales_[n];
    }
    g->operands_ = std::move(q);
    ASSIGN_OR_RETURN(const Prim* prim, g->Get(kReferenceRows, Epilogue::kNone, false, ctx));
    (void)prim;
    return std::shared_ptr<const QuantizedGemm>(std::move(g));
  }

  Status Run(const float* a, int m, float* c, Epilogue epilogue, const float* residual,
             MatmulContext* ctx, int threads) const override {
    if (per_token_) return RunPerToken(a, m, c, epilogue, residual, ctx, threads);
    // The input, smoothed per column and quantized per tensor.
    int8_t* q = ctx->Int8Scratch(size_t(m) * in_);
    const float* mult = input_multipliers_.data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int r = 0; r < m; ++r)
      QuantizeRow<true>(a + size_t(r) * in_, mult, 1.0f, 0.0f, in_, q + size_t(r) * in_);
    const bool apart = residual && residual != c;
    ASSIGN_OR_RETURN(const Prim* prim, Get(m, epilogue, apart, ctx));
    return Execute(ctx, prim->matmul, prim->weights, q, DType::s8, m, in_, out_, bias_.data(), c,
                   apart ? residual : nullptr, "int8 matmul");
  }

  // Each row quantized with its own scale and zero point to uint8 (its
  // [min, max] onto 0..255: post-GELU inputs, mostly above -0.17, keep their
  // resolution); the GEMM scales by the weights' scales alone into scratch,
  // and one pass after it applies each row's scale, takes out its zero
  // point's share (z times the weights' column sums), adds the bias and
  // applies the epilogue.
  Status RunPerToken(const float* a, int m, float* c, Epilogue epilogue, const float* residual,
                     MatmulContext* ctx, int threads) const {
    uint8_t* q = reinterpret_cast<uint8_t*>(ctx->Int8Scratch(size_t(m) * in_));
    float* product = ctx->FloatScratch(size_t(m) * out_ + 2 * size_t(m));
    float* row_scales = product + size_t(m) * out_;
    float* row_zeros = row_scales + m;
    const float* mult = input_multipliers_.data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int r = 0; r < m; ++r) {
      const float* row = a + size_t(r) * in_;
      float lo, hi;  // 0 is in range: a row of zeros stays exact
      RowRange(row, mult, in_, &lo, &hi);
      const float scale = hi > lo ? (hi - lo) / 255.0f : 1.0f, inverse = 1.0f / scale;
      const float zero = std::nearbyint(-lo * inverse);
      QuantizeRow<false>(row, mult, inverse, zero, in_, q + size_t(r) * in_);
      row_scales[r] = scale;
      row_zeros[r] = zero;
    }
    ASSIGN_OR_RETURN(const Prim* prim, Get(m, Epilogue::kNone, false, ctx));
    RETURN_IF_ERROR(Execute(ctx, prim->matmul, prim->weights, q, DType::u8, m, in_, out_, nullptr,
                            product, nullptr, "int8 matmul"));
    const float *b = bias_.data(), *sums = column_sums_.data();
    const Act act = ActOf(epilogue);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int r = 0; r < m; ++r) {
      const float s = row_scales[r], z = row_zeros[r];
      const float* p = product + size_t(r) * out_;
      float* y = c + size_t(r) * out_;
      if (residual) {
        const float* res = residual + size_t(r) * out_;
        for (int n = 0; n < out_; ++n) y[n] = (p[n] - z * sums[n]) * s + b[n] + res[n];
      } else {
        for (int n = 0; n < out_; ++n) y[n] = (p[n] - z * sums[n]) * s + b[n];
      }
      if (act != Act::kNone) BiasActRow(y, out_, nullptr, act);  // while the row is in cache
    }
    return Status::Ok();
  }

 private:
  struct Prim {
    dnnl::matmul matmul;
    memory weights;  // the int8 weights in the layout this primitive reads
  };

  // The primitive for `m` rows with this epilogue: its output scales are this
  // layer's, so primitives are the layer's own (bounded, as MatmulContext's).
  StatusOr<const Prim*> Get(int m, Epilogue e, bool apart, MatmulContext* ctx) const {
    const auto key = std::make_tuple(m, static_cast<int>(e), apart && e == Epilogue::kResidual);
    auto it = prims_.find(key);
    if (it != prims_.end()) return &it->second;
    if (prims_.size() >= 64) prims_.clear();
    try {
      const dnnl::engine& eng = ctx->engine();
      dnnl::primitive_attr attr = AttrFor(e, std::get<2>(key), m, out_);
      attr.set_output_scales(1 << 1, output_scales_);  // per output column
      const memory::desc a({m, in_}, per_token_ ? DType::u8 : DType::s8, Tag::ab),
          b({1, out_}, DType::f32, Tag::ab),
          c({m, out_}, DType::f32, Tag::ab), w_any({in_, out_}, DType::s8, Tag::any);
      // Per token, the bias comes after the rows' scales (RunPerToken).
      dnnl::matmul::primitive_desc pd =
          per_token_ ? dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, w_any, c), attr, eng)
                     : dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, w_any, b, c), attr, eng);
      // The weights in this kernel's layout: one copy per layout.
      memory weights;
      for (const auto& [desc, mem] : layouts_)
        if (desc == pd.weights_desc()) weights = mem;
      if (!weights) {
        memory plain({{in_, out_}, DType::s8, Tag::ba}, eng,
                     const_cast<void*>(operands_.weights.raw()));
        weights = memory(pd.weights_desc(), eng);
        dnnl::reorder(plain, weights).execute(ctx->stream(), plain, weights);
        ctx->stream().wait();
        layouts_.emplace_back(pd.weights_desc(), weights);
      }
      return &prims_.emplace(key, Prim{dnnl::matmul(pd), weights}).first->second;
    } catch (const dnnl::error& err) {
      return DnnlError("int8 matmul creation", err);
    }
  }

  int in_ = 0, out_ = 0;
  bool per_token_ = false;
  std::vector<float> input_multipliers_;  // 1 / (smoothing divisor * input scale)
  std::vector<float> output_scales_;   // input_scale * each row's weight scale
  std::vector<float> column_sums_;     // each output's quantized weights' sum times their scale
  std::vector<float> bias_;            // the bias over output_scales_
  // Caches (the engine serializes its runs).
  mutable std::map<std::tuple<int, int, bool>, Prim> prims_;
  mutable std::vector<std::pair<memory::desc, memory>> layouts_;
};

// The FP8 GEMM, emulated: y = s_x s_w (e4m3(x / s_x) . e4m3(W / s_w)) + bias,
// then the epilogue, with the products and their sums in fp32: the
// arithmetic of an FP8 tensor-core GEMM with fp32 accumulation (cuBLASLt's
// on Hopper, as the CUDA engine runs it), so that a plan's fp8 accuracy can
// be measured, and its GPU answers checked, on any machine. Each operand is
// rounded to E4M3 and held as fp32; the product runs on the fp32 GEMM.
class Fp8Gemm final : public QuantizedGemm {
 public:
  // `w` ([out, in] fp32, bias apart) onto E4M3 with one scale, its largest
  // |w| to 448; the input's scale is `input_scale` (> 0).
  static QuantizedLinear Quantize(const std::vector<float>& w, int in, int out,
                                  float input_scale) {
    float max = 0.0f;
    for (float v : w) max = std::max(max, std::abs(v));
    const float scale = max > 0.0f ? max / kE4M3Max : 1.0f;
    std::vector<uint8_t> q(w.size());
    for (size_t i = 0; i < w.size(); ++i) q[i] = FloatToE4M3(w[i] / scale);
    QuantizedLinear l;
    l.weights = Owned(bertrt::DType::kF8E4M3, {out, in}, std::move(q));
    l.scales = Owned(bertrt::DType::kF32, {1}, std::vector<float>{scale});
    l.smoothing = Owned(bertrt::DType::kF32, {in}, std::vector<float>(in, 1.0f));
    l.input_scale = input_scale;
    return l;
  }

  static StatusOr<std::shared_ptr<const QuantizedGemm>> Create(QuantizedLinear q,
                                                               const std::vector<float>& bias,
                                                               MatmulContext* ctx) {
    const float* smoothing = q.smoothing.f32();
    if (!std::all_of(smoothing, smoothing + q.smoothing.numel(), [](float v) { return v == 1.0f; }))
      return InvalidArgument("cpu engine: an fp8 Linear has no smoothing (all ones)");
    auto g = std::make_shared<Fp8Gemm>();
    const int in = static_cast<int>(q.weights.dim(1)), out = static_cast<int>(q.weights.dim(0));
    // The rounded weights times their scale, and the bias, on the fp32 GEMM.
    PackedLinear packed;
    packed.in = in;
    packed.out = out;
    packed.owned.resize(size_t(in) * out + out);
    const auto* codes = static_cast<const uint8_t*>(q.weights.raw());
    const float scale = q.scales.f32()[0];
    for (size_t i = 0; i < size_t(in) * out; ++i) packed.owned[i] = E4M3ToFloat(codes[i]) * scale;
    std::copy(bias.begin(), bias.end(), packed.owned.begin() + size_t(in) * out);
    packed.w = packed.owned.data();
    packed.b = packed.owned.data() + size_t(in) * out;
    ASSIGN_OR_RETURN(g->rounded_, Linear::Create(std::move(packed), ctx));
    g->operands_ = std::move(q);
    return std::shared_ptr<const QuantizedGemm>(std::move(g));
  }

  Status Run(const float* a, int m, float* c, Epilogue epilogue, const float* residual,
             MatmulContext* ctx, int threads) const override {
    const int in = rounded_.in();
    const float scale = operands_.input_scale, inverse = 1.0f / scale;
    float* x = ctx->FloatScratch(size_t(m) * in);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int r = 0; r < m; ++r)
      for (int k = 0; k < in; ++k) {
        const size_t i = size_t(r) * in + k;
        x[i] = RoundToE4M3(a[i] * inverse) * scale;
      }
    return rounded_.Run(x, m, c, ctx, threads, epilogue, residual);
  }

 private:
  Linear rounded_;  // fp32 GEMM over the weights as E4M3 rounded them
};

namespace {

// The GEMM of `q`'s format (its weights' dtype), after checking its operands.
StatusOr<std::shared_ptr<const QuantizedGemm>> MakeQuantizedGemm(QuantizedLinear q,
                                                                const std::vector<float>& bias,
                                                                MatmulContext* ctx) {
  RETURN_IF_ERROR(CheckOperands(q, static_cast<int>(bias.size())));
  if (q.weights.dtype() == bertrt::DType::kF8E4M3)
    return Fp8Gemm::Create(std::move(q), bias, ctx);
  return Int8Gemm::Create(std::move(q), bias, ctx);
}

}  // namespace

StatusOr<std::vector<float>> Linear::PlainWeights(MatmulContext* ctx) const {
  const int k = packed_.in, n = packed_.out;
  std::vector<float> w(size_t(k) * n);
  if (kernel_ == Kernel::kSgemm) {
    std::copy(packed_.w, packed_.w + w.size(), w.begin());
    return w;
  }
  try {
    memory plain({{k, n}, DType::f32, Tag::ba}, ctx->engine(), w.data());
    dnnl::reorder(weights_[0].second, plain).execute(ctx->stream(), weights_[0].second, plain);
    ctx->stream().wait();
  } catch (const dnnl::error& err) {
    return DnnlError("weight reorder", err);
  }
  return w;
}

StatusOr<std::vector<float>> Linear::SmoothingDivisors(const std::vector<float>& input_max,
                                                      float alpha, MatmulContext* ctx) const {
  const int k = packed_.in, n = packed_.out;
  if (input_max.size() != size_t(k)) return Internal("cpu engine: smoothing statistics' width");
  ASSIGN_OR_RETURN(const std::vector<float> w, PlainWeights(ctx));
  std::vector<float> divisors(k, 1.0f);
  for (int j = 0; j < k; ++j) {
    float w_max = 0.0f;
    for (int o = 0; o < n; ++o) w_max = std::max(w_max, std::abs(w[size_t(o) * k + j]));
    if (input_max[j] > 0.0f && w_max > 0.0f)
      divisors[j] = std::pow(input_max[j], alpha) / std::pow(w_max, 1.0f - alpha);
  }
  return divisors;
}

Status Linear::Quantize(QuantFormat format, float input_scale, MatmulContext* ctx,
                        const std::vector<float>& smoothing) {
  if (quantized_) return Internal("cpu engine: a Linear quantized twice");
  if (format == QuantFormat::kFp8 && !smoothing.empty())
    return Internal("cpu engine: fp8 takes no smoothing");
  ASSIGN_OR_RETURN(std::vector<float> w, PlainWeights(ctx));
  QuantizedLinear q =
      format == QuantFormat::kFp8
          ? Fp8Gemm::Quantize(w, packed_.in, packed_.out, input_scale)
          : Int8Gemm::Quantize(std::move(w), packed_.in, packed_.out, smoothing, input_scale);
  ASSIGN_OR_RETURN(quantized_, MakeQuantizedGemm(std::move(q), bias_, ctx));
  use_quantized_ = true;
  return Status::Ok();
}

StatusOr<Linear> Linear::FromQuantized(QuantizedLinear operands, std::vector<float> bias,
                                       MatmulContext* ctx) {
  Linear l;
  l.bias_ = std::move(bias);
  ASSIGN_OR_RETURN(l.quantized_, MakeQuantizedGemm(std::move(operands), l.bias_, ctx));
  l.packed_.in = l.quantized_->in();
  l.packed_.out = l.quantized_->out();
  l.kernel_ = Kernel::kMatmul;
  l.use_quantized_ = true;
  return l;
}

const QuantizedLinear* Linear::QuantizedOperands() const {
  return use_quantized_ ? &quantized_->operands() : nullptr;
}

void Linear::UseQuantized(bool use) { use_quantized_ = use && quantized_; }

void Linear::DropUnusedWeights() {
  if (use_quantized_) {
    weights_.clear();
    packed_.owned = {};
    packed_.w = packed_.b = nullptr;
  } else {
    quantized_.reset();
  }
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
  if (use_quantized_) return quantized_->Run(a, m, c, epilogue, residual, ctx, threads);
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
  const bool bf16 = Bf16();
  const void* input = a;
  if (bf16) {
    // The input rounded to bf16 (to nearest even), as the kernel reads it.
    uint16_t* narrow = ctx->Bf16Scratch(size_t(m) * in);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < m; ++r)
      NarrowFromFloat(bertrt::DType::kBF16, a + size_t(r) * in, in, narrow + size_t(r) * in);
    input = narrow;
  }
  return Execute(ctx, prim->matmul, w, input, bf16 ? DType::bf16 : DType::f32, m, in, out,
                 bias_.data(), c, apart ? residual : nullptr, bf16 ? "bf16 matmul" : "matmul");
}

Status Linear::UseBf16(MatmulContext* ctx) {
  if (Bf16() || quantized_)
    return Internal("cpu engine: a Linear made bf16 twice, or after 8 bits");
  if (kernel_ != Kernel::kMatmul)
    return Unimplemented(
        "--precision bf16 on the CPU needs oneDNN's brgemm kernels (AVX-512 and up); this CPU "
        "runs the sgemm path: use fp32");
  const int k = packed_.in, n = packed_.out;
  try {
    const dnnl::matmul::primitive_desc pd =
        MakeDesc(kReferenceRows, k, n, Epilogue::kNone, false,
                 memory::desc({k, n}, DType::bf16, Tag::any), ctx->engine());
    // Without AVX512_BF16 (or AMX) oneDNN has only its reference kernel, or
    // one that widens bf16 back to fp32: slower than fp32 itself.
    if (std::strstr(pd.impl_info_str(), "bf16") == nullptr)
      return Unimplemented(std::string("--precision bf16 on the CPU needs AVX512_BF16 or AMX "
                                       "(oneDNN offers ") +
                           pd.impl_info_str() + " here): use fp32, or int8");
    // From the fp32 copy reordered at creation, narrowed as it is reordered.
    memory dst(pd.weights_desc(), ctx->engine());
    dnnl::reorder(weights_[0].second, dst).execute(ctx->stream(), weights_[0].second, dst);
    ctx->stream().wait();
    weights_.clear();
    weights_.emplace_back(pd.weights_desc(), std::move(dst));
  } catch (const dnnl::error& err) {
    return DnnlError("bf16 weight reorder", err);
  }
  packed_.owned = {};
  packed_.w = packed_.b = nullptr;
  return Status::Ok();
}

}  // namespace bertrt::cpu

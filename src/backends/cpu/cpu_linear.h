// Linear layers. Where oneDNN has a brgemm matmul kernel (AVX-512 and up)
// they run on cached matmul primitives: the weights are reordered once, when
// the layer is created, into the kernel's blocked layout, and bias,
// activation or residual add run in the GEMM's epilogue instead of as extra
// passes over the activations. Elsewhere (AVX2) oneDNN's matmul falls back to
// a gemm wrapper measured up to 1.9x slower than plain sgemm on the FFN
// shapes, so there the layers call sgemm and add bias/activation in one pass.
// fp32 throughout: the fpmath mode stays strict (no bf16/TF32 ever).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "bertrt/quantized_weights.h"
#include "bertrt/status.h"

namespace bertrt::cpu {

// What the GEMM does after a W^T (+ bias): nothing, an activation, or add
// the residual (c += a W^T + b when the residual is c itself).
enum class Epilogue { kNone, kGelu, kGeluTanh, kRelu, kResidual };

// The dnnl engine, stream and primitives shared by every Linear of one CPU
// engine. Primitives depend only on the shape and epilogue, so the 12 layers
// of BERT-base share four of them per row count. Not thread-safe: callers
// serialize (the CPU engine holds its mutex).
class MatmulContext {
 public:
  // Creates the dnnl engine and stream; call once before anything else.
  Status Init();

  struct Prim {
    dnnl::matmul matmul;
    dnnl::memory::desc weights;  // the layout this primitive reads
  };
  // The primitive for [m, k] x [k, n] with this epilogue (a residual read
  // from c itself, or with `residual_apart` from a tensor of its own);
  // `preferred` is the weights layout tried first, so that every row count
  // reads the one copy reordered at creation when the kernel accepts it.
  StatusOr<const Prim*> Get(int m, int k, int n, Epilogue e, bool residual_apart,
                            const dnnl::memory::desc& preferred);

  const dnnl::engine& engine() const { return engine_; }
  dnnl::stream& stream() { return stream_; }
  // Room for `n` int8 values: the input of an int8 GEMM, quantized.
  int8_t* Int8Scratch(size_t n) {
    if (int8_scratch_.size() < n) int8_scratch_.resize(n);
    return int8_scratch_.data();
  }
  // Room for `n` floats: an int8 GEMM's product before its epilogue, or an
  // fp8 GEMM's input rounded.
  float* FloatScratch(size_t n) {
    if (float_scratch_.size() < n) float_scratch_.resize(n);
    return float_scratch_.data();
  }
  // Room for `n` bf16 values: the input of a bf16 GEMM, rounded.
  uint16_t* Bf16Scratch(size_t n) {
    if (bf16_scratch_.size() < n) bf16_scratch_.resize(n);
    return bf16_scratch_.data();
  }
  size_t scratch_bytes() const {
    return int8_scratch_.size() + float_scratch_.size() * 4 + bf16_scratch_.size() * 2;
  }

 private:
  std::vector<int8_t> int8_scratch_;
  std::vector<uint16_t> bf16_scratch_;
  std::vector<float> float_scratch_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<int, int, int, int, bool, dnnl::memory::data_type>, Prim> prims_;
};

// Which GEMM a Linear runs on; kAuto picks by the machine (see the top).
enum class Kernel { kAuto, kMatmul, kSgemm };

// A Linear's GEMM in 8 bits (Linear::Quantize), int8 or fp8.
// int8 (Int8Gemm): the weights symmetric per output channel (max |w| of each
// row to 127); the input divided per column by SmoothQuant's divisors (which
// multiply the weights' columns), then either per token (each row's own
// scale and zero point, uint8: the default) or per tensor (a calibrated
// scale, int8, values beyond 127 scales clipped); int32 accumulation on
// oneDNN's VNNI kernels, scaled back to fp32 with the bias and the epilogue.
// fp8 (Fp8Gemm): the weights with one scale (max |w| to 448), the input with
// a calibrated one, both rounded to E4M3 and multiplied in fp32: Hopper's
// FP8 GEMM emulated, the reference for the CUDA engine's.
class QuantizedGemm;

// c[m, out] = epilogue(a[m, in] W^T + b), the epilogue chosen per call.
class Linear {
 public:
  Linear() = default;
  Linear(Linear&&) = default;
  Linear& operator=(Linear&&) = default;

  // For the matmul kernel, reorders `packed`'s weights into the layout it
  // prefers for a typical row count; the sgemm kernel reads `packed` as is.
  static StatusOr<Linear> Create(PackedLinear packed, MatmulContext* ctx,
                                 Kernel kernel = Kernel::kAuto);

  // c = epilogue(a W^T + b); with kResidual c = a W^T + b + residual
  // ([m, out]; c itself for c += a W^T + b). `threads` splits the sgemm
  // kernel's columns; the matmul kernel threads over omp_get_max_threads()
  // of the calling thread. Not thread-safe (the weights layouts are cached).
  Status Run(const float* a, int m, float* c, MatmulContext* ctx, int threads,
             Epilogue epilogue = Epilogue::kNone, const float* residual = nullptr) const;

  int in() const { return packed_.in; }
  int out() const { return packed_.out; }
  bool empty() const { return packed_.out == 0; }
  Kernel kernel() const { return kernel_; }

  // From now on in bf16: the weights kept in bf16 (reordered once, the fp32
  // copy dropped), each input rounded to bf16 as the GEMM reads it, fp32
  // accumulation, bias and epilogue (oneDNN's AVX512_BF16 kernels; refused
  // where this CPU has none).
  Status UseBf16(MatmulContext* ctx);
  // Whether it runs in bf16 (its weights are kept in bf16).
  bool Bf16() const {
    return !weights_.empty() && weights_[0].first.data_type() == dnnl::memory::data_type::bf16;
  }

  // SmoothQuant's divisors of this layer's input columns: s_j =
  // max|x_j|^alpha / max|w_j|^(1 - alpha) for the calibrated `input_max`
  // per column, so that x_j / s_j (and w_j s_j, which keeps the product)
  // spread their outliers between them.
  StatusOr<std::vector<float>> SmoothingDivisors(const std::vector<float>& input_max, float alpha,
                                                 MatmulContext* ctx) const;
  // Makes the 8-bit GEMM of `format` and runs on it from now on: for int8
  // its input divided by `smoothing` per column (when given), then quantized
  // per token (`input_scale` 0) or with `input_scale` (a calibrated |x| bound
  // / 127); for fp8 with `input_scale` (the bound / 448; no smoothing).
  // The fp32 weights stay until DropUnusedWeights.
  Status Quantize(QuantFormat format, float input_scale, MatmulContext* ctx,
                  const std::vector<float>& smoothing = {});
  // A Linear that runs only the 8-bit GEMM on `operands` (a plan's; the
  // format is their weights' dtype), with `bias` [out].
  static StatusOr<Linear> FromQuantized(QuantizedLinear operands, std::vector<float> bias,
                                        MatmulContext* ctx);
  // The 8-bit GEMM's operands when Run takes it; else null.
  const QuantizedLinear* QuantizedOperands() const;
  // Whether Run takes the 8-bit GEMM (once quantized; true after Quantize).
  void UseQuantized(bool use);
  bool uses_quantized() const { return use_quantized_; }
  // Frees the weights of the GEMM Run does not take.
  void DropUnusedWeights();

 private:
  // The weights as [out, in] fp32, whichever layout they are kept in.
  StatusOr<std::vector<float>> PlainWeights(MatmulContext* ctx) const;
  StatusOr<dnnl::memory> WeightsIn(const dnnl::memory::desc& layout, MatmulContext* ctx) const;
  Status RunMatmul(const float* a, int m, float* c, MatmulContext* ctx, Epilogue epilogue,
                   const float* residual) const;
  void RunSgemm(const float* a, int m, float* c, int threads, Epilogue epilogue,
                const float* residual) const;

  Kernel kernel_ = Kernel::kSgemm;
  // The sgemm kernel's weights; the matmul kernel drops its copy (Q|K|V's
  // concatenation) once reordered and keeps only the shape.
  PackedLinear packed_;
  std::vector<float> bias_;
  // The weights in each layout some primitive asked for; the first is the one
  // made at creation, the others (rare: a row count whose kernel wants other
  // blocking) are reordered from it on first use: a cache, hence mutable.
  mutable std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> weights_;
  std::shared_ptr<const QuantizedGemm> quantized_;  // set once quantized
  bool use_quantized_ = false;
};

}  // namespace bertrt::cpu

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

#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ops.h"
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

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<int, int, int, int, bool>, Prim> prims_;
};

// Which GEMM a Linear runs on; kAuto picks by the machine (see the top).
enum class Kernel { kAuto, kMatmul, kSgemm };

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

 private:
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
};

}  // namespace bertrt::cpu

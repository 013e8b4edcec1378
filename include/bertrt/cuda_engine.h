// The CUDA engine's factory and options. Plain C++: callers never include CUDA.
// In a build without the CUDA backend CreateCudaEngine exists too and says so.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/engine.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"

namespace bertrt {

struct CudaEngineOptions {
  int device = 0;
  Precision precision = Precision::kFp16;
  // 0: the activation memory is sized on first use and grown when a larger
  // batch arrives. > 0: reserved for this many tokens at creation, and larger
  // batches are refused.
  int max_batch_tokens = 0;
  // Times every operation of each forward (GEMMs, attention, LayerNorms,
  // the head) for Engine::Profile (what `bertrt bench --profile` prints):
  // a one-thread kernel between consecutive operations reads the GPU's
  // global timer, inside the CUDA graph, so that an operation's time is
  // what it takes in the forward that serves (its launch gap included).
  // The stamps themselves cost about a microsecond each, measured in every
  // forward and taken out of the operations' times; they also keep the
  // engine's kernels from overlapping their launch with the operation
  // before (BERTRT_PDL), so at batch 1 the operations sum to
  // ~5% more than an unprofiled forward. Never for serving.
  bool profile = false;
  // fp16/bf16 only: runs the erf GELU (BERT's "gelu") as cuBLASLt's fused
  // bias + tanh-form GELU epilogue instead of a separate pass over the FFN
  // activations (--gelu tanh). Faster (BERT-base batch 128 on the H200:
  // 5.49 against 6.08 ms), but not the model's function: the forms differ by
  // up to 4.7e-4 (at x = -2.7), a systematic change, not rounding, and on a
  // trained model (all-MiniLM-L6-v2) fp16 embeddings then sit 2.3x further
  // from the fp32 reference than PyTorch's fp16 (0.78x with the exact form;
  // bench/PARITY.md), outside the parity suite's bound. Hence off by
  // default. fp32 engines are always exact.
  bool approximate_erf_gelu = false;
  // Where the engine's notices go (nullptr: nowhere).
  std::function<void(const std::string&)> on_notice;
};

// Uploads the model's weights to the GPU in the chosen precision, every
// optimization on unless a BERTRT_* comparison switch turns it off (README's
// benchmark section).
// FailedPrecondition when this process has no usable GPU.
StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                   const CudaEngineOptions& options);

// The plan builder's tuning step: times cuBLASLt's candidate algorithms for
// every GEMM that an engine with `options` runs on a model of `config`, at
// each batch size in tokens that the engine rounds batches to, up to
// max_tokens, on GPU options.device. progress(done, total) follows the batch
// sizes. Returns this GPU's choices, to store in the plan.
StatusOr<std::vector<GemmChoice>> TimeGemms(const ModelConfig& config,
                                            const CudaEngineOptions& options, int max_tokens,
                                            const std::function<void(int, int)>& progress);

}  // namespace bertrt

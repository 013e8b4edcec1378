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
  // before (overlap_kernel_launches), so at batch 1 the operations sum to
  // ~5% more than an unprofiled forward. Never for serving.
  bool profile = false;
  // Each batch shape's forward is captured once as a CUDA graph and replayed
  // (batches rounded up to a few bucketed shapes). Off, every batch runs its
  // kernels eagerly at its exact shape: slower, for debugging and checks
  // (BERTRT_CUDA_GRAPHS=0 in the command-line tools).
  bool cuda_graphs = true;
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
  // How each GEMM's cuBLASLt algorithm is picked where no choice is cached
  // for this GPU (a plan's tuning cache, or an engine of this process timed
  // it): false, the heuristic's first answer; true, the fastest of its
  // candidates, timed at the shape's first call (milliseconds on the request
  // path, once per batch shape). A plan whose choices were all timed for
  // other GPUs, cuBLASLt versions or precisions turns it on (one built
  // without a GPU keeps the heuristic); either says so through on_notice.
  bool time_gemms = false;
  // sm_90 and newer: the engine's own kernels (LayerNorm, attention, heads;
  // not cuBLASLt's) are launched with programmatic dependent launch, so that
  // each one's launch overlaps the end of the kernel before it. Off only for
  // comparisons (BERTRT_PDL=0 in the command-line tools).
  bool overlap_kernel_launches = true;
  // sm_90 fp16/bf16: GEMMs of up to 128 rows whose K is at least their width
  // (batch 1's attention-output and FFN-output GEMMs) run on the engine's
  // own split-K kernel (src/backends/cuda/splitk_gemm.h) instead of cuBLASLt. Off only for comparisons (BERTRT_SPLITK_GEMM=0 in
  // the command-line tools).
  bool splitk_gemms = true;
  // sm_90 fp16/bf16, erf GELU: the FFN's first GEMM applies bias and GELU in
  // its epilogue (src/backends/cuda/bias_gelu_gemm.h, from 2,432 rows)
  // instead of cuBLASLt's GEMM and then a pass of the activation kernel.
  // Off only for comparisons (BERTRT_FUSED_GELU_GEMM=0 in the command-line
  // tools).
  bool fused_gelu_gemm = true;
  // sm_90 fp16/bf16: attention runs on the kernel fed by a TMA producer warp
  // (src/backends/cuda/attention_tma.cuh) rather than the wgmma kernel whose
  // threads all copy. Off only for comparisons (BERTRT_TMA_ATTENTION=0 in the
  // command-line tools).
  bool tma_attention = true;
  // Where attention runs on the TMA kernel and no sequence of a batch is
  // longer than 128 tokens: the sequences are laid out so that consecutive
  // ones fill windows of 128 rows, and attention runs one unit per window
  // and head instead of one per sequence and head (src/backends/cuda/
  // batch_shape.h's kAttentionWindow). Off only for comparisons (BERTRT_ATTENTION_WINDOWS=0
  // in the command-line tools).
  bool attention_windows = true;
  // A model whose outputs read only each sequence's first token of the last
  // layer (the pooler, CLS pooling, no hidden states asked for) has that
  // layer's attention computed for the first queries alone
  // (kernels.h's FirstQueryAttention) instead of for every query with the
  // rest discarded. Off only for comparisons (BERTRT_FIRST_QUERY_ATTENTION=0
  // in the command-line tools).
  bool first_query_attention = true;
  // Where the engine's notices go (nullptr: nowhere).
  std::function<void(const std::string&)> on_notice;
};

// Uploads the model's weights to the GPU in the chosen precision.
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

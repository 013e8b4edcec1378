// The CUDA engine's comparison switches: each optimization's "off" position,
// kept for A/B measurements, the parity suite and debugging, never a choice a
// user makes (CudaEngineOptions holds those). The command-line tools read
// them from BERTRT_* variables (Tuning::FromEnvironment; README's
// benchmark section lists them); tests and the parity runner set them
// directly through cuda::CreateCudaEngine.
#pragma once

#include <memory>

#include "bertrt/cuda_engine.h"
#include "bertrt/engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

struct Tuning {
  // Each batch shape's forward is captured once as a CUDA graph and replayed
  // (batches rounded up to a few bucketed shapes). Off, every batch runs its
  // kernels eagerly at its exact shape: slower (BERTRT_CUDA_GRAPHS=0).
  bool cuda_graphs = true;
  // How each GEMM's cuBLASLt algorithm is picked where no choice is cached
  // for this GPU (a plan's tuning cache, or an engine of this process timed
  // it): false, the heuristic's first answer; true, the fastest of its
  // candidates, timed at the shape's first call (milliseconds on the request
  // path, once per batch shape). A plan whose choices were all timed for
  // other GPUs, cuBLASLt versions or precisions turns it on (one built
  // without a GPU keeps the heuristic); either says so through on_notice.
  // On for every model with BERTRT_GEMM_TUNING=1, against the heuristic.
  bool time_gemms = false;
  // sm_90 and newer: the engine's own kernels (LayerNorm, attention, heads;
  // not cuBLASLt's) are launched with programmatic dependent launch, so that
  // each one's launch overlaps the end of the kernel before it
  // (BERTRT_PDL=0).
  bool overlap_kernel_launches = true;
  // sm_90 fp16/bf16: GEMMs of up to 128 rows whose K is at least their width
  // (batch 1's attention-output and FFN-output GEMMs) run on the engine's
  // own split-K kernel (splitk_gemm.h) instead of cuBLASLt
  // (BERTRT_SPLITK_GEMM=0).
  bool splitk_gemms = true;
  // sm_90 fp16/bf16, erf GELU: the FFN's first GEMM applies bias and GELU in
  // its epilogue (bias_gelu_gemm.h, from 2,432 rows) instead of cuBLASLt's
  // GEMM and then a pass of the activation kernel (BERTRT_FUSED_GELU_GEMM=0).
  // (The int8 GEMM's GELU is always in its epilogue; fp8's never.)
  bool fused_gelu_gemm = true;
  // sm_90 fp16/bf16: attention runs on the kernel fed by a TMA producer warp
  // (attention_tma.cuh) rather than the wgmma kernel whose threads all copy
  // (BERTRT_TMA_ATTENTION=0).
  bool tma_attention = true;
  // Where attention runs on the TMA kernel and no sequence of a batch is
  // longer than 128 tokens: the sequences are laid out so that consecutive
  // ones fill windows of 128 rows, and attention runs one unit per window
  // and head instead of one per sequence and head (batch_shape.h's
  // kAttentionWindow; BERTRT_ATTENTION_WINDOWS=0).
  bool attention_windows = true;
  // A model whose outputs read only each sequence's first token of the last
  // layer (the pooler, CLS pooling, no hidden states asked for) has that
  // layer's attention computed for the first queries alone
  // (FirstQueryAttention) instead of for every query with the rest
  // discarded (BERTRT_FIRST_QUERY_ATTENTION=0).
  bool first_query_attention = true;
  // 8-bit engines: the op before an 8-bit Linear makes its 8-bit input in
  // its own pass (fp8: the erf GELU's pass and the LayerNorm's; int8: the
  // LayerNorm's, with the rows' scales and zero points) instead of writing
  // 16 bits that a quantization pass reads again
  // (BERTRT_FUSED_QUANTIZATION=0). fp8 on the H100: BERT-base b128 s128
  // 4.87 ms against 5.53 without it, BERT-large b256 s384 90.1 against
  // 101.1 (bench/RESULTS.md, 2026-12-06).
  bool fused_quantization = true;

  // The switches as the BERTRT_* variables set them: each on unless its
  // variable is 0 (time_gemms: off unless BERTRT_GEMM_TUNING is 1).
  static Tuning FromEnvironment();
};

// bertrt::CreateCudaEngine with the switches given rather than read from the
// environment.
StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                   const CudaEngineOptions& options,
                                                   const Tuning& tuning);

}  // namespace bertrt::cuda

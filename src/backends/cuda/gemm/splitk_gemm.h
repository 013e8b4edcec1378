// A GEMM of our own for small row counts on Hopper: split K across a thread
// block cluster, reduced in distributed shared memory.
//
// Why: at batch 1 (128 tokens) cuBLASLt's heuristic runs BERT-base's FFN-output
// GEMM (128 x 3,072 -> 768) in 6.8 us, though its 4.7 MB of weights stream from
// HBM in ~1 us: a 128 x 768 output is at most a dozen of its tiles, so a dozen
// of the 132 multiprocessors walk all of K. cuBLASLt's split-K configurations
// run older kernels and were slower. With this kernel for the attention-output
// and FFN-output GEMMs, batch 1 takes 0.384 ms instead of 0.422 on the H200
// (bench/RESULTS.md, 2026-11-30, with each GEMM's times). The blocks of one
// output tile form a cluster, each takes a share of K (cp.async into 128-byte-
// swizzled shared memory, wgmma from there), and the cluster sums the fp32
// partials in each other's shared memory, in a fixed order (the same bits every
// run), applying bias / residual / activation as it writes. No workspace, no
// second kernel, and the output is what LtGemm::Linear writes.
#pragma once

#include "backends/cuda/gemm/epilogue.h"
#include "backends/cuda/ops/launch.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

struct SplitKGemmArgs {
  const void* x;  // [rows, in]
  int rows, in;
  // [out, in], HF's layout. Read before the previous kernel on the stream
  // has finished (programmatic dependent launch): no kernel may write it.
  const void* w;
  const void* bias;  // [out]
  int out;
  Epilogue epilogue;
  const void* residual;  // [rows, out] or null
  void* y;               // [rows, out]; may not alias x
  int sm_count;
};

// Whether the engine runs this GEMM through SplitKLinear: an sm_90 GPU and
// a build with sm_90a, fp16/bf16, `in` and `out` multiples of 64, and a
// shape where it beat cuBLASLt (few rows, K at least the output width; or
// the erf GELU, which cuBLASLt cannot apply).
bool SplitKLinearApplies(Precision p, int compute_capability, int rows, int in, int out,
                         Epilogue epilogue);

// y = act(x W^T + bias [+ residual]), as LtGemm::Linear; fp32 accumulation.
// Any row count; `in` and `out` multiples of 64 (else InvalidArgument).
Status SplitKLinear(Precision p, const SplitKGemmArgs& a, Stream stream);

// The cluster size (ways K is split) SplitKLinear aims at for this shape; it
// takes fewer where the GPU cannot hold one cluster per output tile at once.
int SplitKWays(int rows, int in, int out, int sm_count);

}  // namespace bertrt::cuda

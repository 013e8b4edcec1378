// A GEMM of our own for small row counts on Hopper: split K across a thread
// block cluster, reduced in distributed shared memory.
//
// Why: at batch 1 (128 tokens) cuBLASLt's Hopper kernels run BERT-base's
// GEMMs in 3.7-6.8 us each, far above what their weights take to stream
// (ffn_out: 4.7 MB, ~1 us from HBM): an output of 128 x 768 is 12 tiles of
// 128 x 64, so 12 of the 132 multiprocessors walk all 3,072 of K. Its
// split-K configurations run the older kernels and were slower
// (bench/RESULTS.md, 2026-11-30). Here the blocks of one output tile form a
// cluster, each takes a share of K (cp.async into 128-byte-swizzled shared
// memory, wgmma from there), and the cluster sums the fp32 partials in
// each other's shared memory, in a fixed order (the same bits every run),
// applying bias / residual / activation as it writes. No workspace, no
// second kernel, and the output is what LtGemm::Linear writes.
#pragma once

#include "backends/cuda/kernels.h"

namespace bertrt::cuda {

struct SplitKGemmArgs {
  const void* x;  // [rows, in]
  int rows, in;
  const void* w;     // [out, in], HF's layout
  const void* bias;  // [out]
  int out;
  Epilogue epilogue;
  const void* residual;  // [rows, out] or null
  void* y;               // [rows, out]; may not alias x
  int sm_count;
};

// Whether the engine runs this GEMM through SplitKLinear: an sm_90 GPU and
// a build with sm_90a, fp16/bf16, `in` and `out` multiples of 64, and a
// shape where it beat cuBLASLt (few rows, K at least the output width).
bool SplitKLinearApplies(Precision p, int compute_capability, int rows, int in, int out);

// y = act(x W^T + bias [+ residual]), as LtGemm::Linear; fp32 accumulation.
// Any row count; `in` and `out` multiples of 64 (else InvalidArgument).
Status SplitKLinear(Precision p, const SplitKGemmArgs& a, Stream stream);

// The cluster size (ways K is split) SplitKLinear uses for this shape.
int SplitKWays(int rows, int in, int out, int sm_count);

}  // namespace bertrt::cuda

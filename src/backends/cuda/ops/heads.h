// The launchers of heads.cu (ops/launch.h says what they take).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda/ops/launch.h"
#include "bertrt/model.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// out[s] = x[first token of sequence s], [num_seqs, hidden].
Status GatherFirstTokens(Precision p, const void* x, const int32_t* cu_seqlens, int num_seqs,
                         int hidden, void* out, Stream stream);

// out = act(in) as fp32 (the pooler's tanh, DistilBERT's pre_classifier ReLU).
Status ActivateToFloat(Precision p, const void* in, float* out, size_t n, DenseActivation act,
                       Stream stream);

// y[rows, out] = x[rows, in] W^T + b for the small heads (a few labels, or
// a sentence-transformers Dense module on a batch's pooled rows), where a GEMM
// library's tile would be mostly empty. W and b are fp32 (b may be null); x is
// in precision `p` (kFp32 for fp32 inputs).
Status SmallLinear(Precision p, const void* x, int rows, int in, const float* w, const float* b,
                   int out, float* y, Stream stream);

// Row s of out (fp32, `out_stride` floats apart, its first `hidden` written)
// = sequence s's rows of x pooled by `pooling` (sentence-transformers' modes).
// Sentence-transformers' pooling of each sequence from its token
// pool_start[s] on (cpu::PoolSequences' definitions).
Status PoolSequences(Precision p, const void* x, const int32_t* cu_seqlens,
                     const int32_t* pool_start, int num_seqs, int hidden, Pooling pooling,
                     float* out, int out_stride, Stream stream);

// x = act(x) for a sentence-transformers Dense module, fp32, in place.
Status ApplyDenseActivation(float* x, size_t n, DenseActivation act, Stream stream);

// Each row x / max(||x||_2, 1e-12).
Status L2NormalizeRows(float* x, int rows, int width, Stream stream);

// SPLADE's pooling, cpu::SpladePool's definition: `rows` tokens' masked-LM
// logits (precision p, [rows, vocab], the batch's tokens first_token on)
// taken into their sequences' rows of `out` (fp32 [seqs, vocab], zeroed
// before the first chunk) by max, or by sum with `sum`, of log(1 + relu(v))
// (twice with log1p_twice).
Status SpladePool(Precision p, const void* logits, int first_token, int rows,
                  const int32_t* cu_seqlens, int num_seqs, int vocab, bool sum, bool log1p_twice,
                  float* out, Stream stream);

}  // namespace bertrt::cuda

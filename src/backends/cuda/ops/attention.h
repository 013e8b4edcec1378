// The launchers of attention.cu (ops/launch.h says what they take).
#pragma once

#include <cstdint>

#include "backends/cuda/ops/launch.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// Which attention kernel runs. kAuto picks by precision, head dim, GPU and
// batch; the others force one, so that tests can hold each against a
// reference (a forced kernel that the GPU, the build, the precision or the
// head dim rules out is an error).
enum class AttentionKernel {
  kAuto,
  kGeneral,  // fp32 arithmetic, any head dim up to kMaxAttentionHeadDim
  kMmaSync,  // tensor cores through mma.sync (sm_80+), head dims 32/64/128, fp16/bf16
  kWgmma,    // tensor cores through wgmma (sm_90 with an sm_90a build), the same
  kTma,      // wgmma fed by a TMA producer warp, persistent blocks (the same; needs `tokens`)
};

// Whether this build compiled the wgmma kernel (CMake lists 90a among the
// CUDA architectures).
bool WgmmaAttentionBuilt();

struct AttentionArgs {
  const void* qkv;  // [tokens, 3 * hidden]: Q | K | V, heads contiguous in each
  // [2 * num_seqs]: (first token, length) of each sequence, longest first,
  // the order in which their blocks start (batch_shape.h's LongestFirst); a
  // sequence may be empty.
  const int32_t* by_length;
  int num_seqs;
  int max_len;
  int hidden;
  int heads;
  void* ctx;  // [tokens, hidden]
  // 10 * major + minor. mma.sync m16n8k16 needs sm_80 or newer (older GPUs
  // take the general path); wgmma needs sm_90 and a build with sm_90a.
  int compute_capability;
  int sm_count;  // the GPU's multiprocessors: a small batch takes smaller blocks, to use them
  // Shared out by the tensor-core kernels' blocks; the general path ignores it.
  PrefetchRanges prefetch;
  AttentionKernel kernel = AttentionKernel::kAuto;
  // Rows of qkv (and ctx): the TMA kernel's copies stop there. 0 (unknown)
  // rules that kernel out.
  int tokens = 0;
  // Whether kAuto may pick the TMA kernel (off only for comparisons).
  bool allow_tma = true;
  // Attention windows (batch_shape.h's kAttentionWindow), only where
  // AttentionTakesWindows: by_length then lists windows of whole sequences
  // (LayOutWindows), and row_bounds[token] = lo | hi << 16 bounds the keys
  // of the token's sequence within a window of several. nullptr: by_length
  // lists sequences.
  const int32_t* row_bounds = nullptr;
  // MPNet's relative position bias (model/relative_position.h's table,
  // [heads][2 * bias_span - 1]), added to every score; the general and the
  // mma.sync kernels take it. nullptr: none.
  const float* position_bias = nullptr;
  int bias_span = 0;
  // Local attention (ModernBERT's local layers): query i sees only keys j
  // with |i - j| <= local_window, and the kernels visit only their tiles
  // (time linear in length). 0: every key. The general and the mma.sync
  // kernels take it.
  int local_window = 0;
};

// Largest head dimension Attention supports.
inline constexpr int kMaxAttentionHeadDim = 256;

// Whether `a`, with by_length describing sequences, gets a kernel that takes
// packed windows instead (the TMA kernel with 128-query units, on a batch
// whose sequences fit a window).
bool AttentionTakesWindows(Precision p, const AttentionArgs& a);

// Per sequence and head: softmax(Q K^T / sqrt(head_dim)) V over that
// sequence's own tokens. Tensor cores for fp16/bf16 with head dims 32, 64 and
// 128; a general fp32-arithmetic path otherwise.
Status Attention(Precision p, const AttentionArgs& a, Stream stream);

struct FirstQueryAttentionArgs {
  // Token t's K at kv[t * kv_ld], its V at kv[t * kv_ld + hidden]; sequence
  // s's first query at q[first * q_ld], first its first token's index, or s
  // where q_by_sequence. Attention's packed [tokens, 3 * hidden] qkv: q =
  // qkv, kv = qkv + hidden, both 3 * hidden. The last layer may compute Q
  // for the first tokens alone (EncoderForward): q [num_seqs, hidden].
  const void* q;
  int q_ld;
  bool q_by_sequence;
  const void* kv;
  int kv_ld;
  const int32_t* cu_seqlens;  // [num_seqs + 1]; a sequence may be empty
  int num_seqs;
  // At least every sequence's length but those of sequences whose outputs
  // are never read (a padded shape's dummies): keys past it are not read.
  int max_len;
  int hidden;
  int heads;
  void* out;                // [num_seqs, hidden]: row s is sequence s's first token's context
  PrefetchRanges prefetch;  // as AttentionArgs::prefetch
};

// Attention for each sequence's first query alone, written compactly: what
// the last layer of a model whose head reads only first tokens (the pooler,
// CLS pooling) needs of it. One block per (sequence, head) in fp32
// arithmetic; an empty sequence's row is zeros.
Status FirstQueryAttention(Precision p, const FirstQueryAttentionArgs& a, Stream stream);

}  // namespace bertrt::cuda

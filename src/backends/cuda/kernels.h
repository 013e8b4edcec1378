// Launchers of the CUDA engine's kernels, callable from plain C++. Activations
// are row-major [rows, width] in the engine's precision (`p`: float, half or
// bfloat16), sequences packed back to back and delimited by cu_seqlens; every
// reduction (LayerNorm statistics, softmax, dot products) runs in fp32.
// Each launcher reports a bad launch as a Status; errors inside a kernel
// surface at the next synchronizing call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/batch_shape.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// Where a launcher enqueues its kernel: the engine's stream, and whether the
// kernel may launch while the stream's previous kernel is still finishing
// (programmatic dependent launch, sm_90 and newer; device_util.cuh's Launch).
// Always safe for the kernels here: each waits for the previous kernel's
// results before it touches memory.
struct Stream {
  cudaStream_t handle;
  bool overlap_launch;
};

// Weights (16-byte aligned) that a kernel pulls into L2 as it starts, for
// the GEMMs after it (device_util.cuh's PrefetchShare).
struct PrefetchRanges {
  static constexpr int kMax = 4;
  const void* ptr[kMax];
  size_t bytes[kMax];
  int count = 0;
  void Add(const void* p, size_t n) {
    if (p && n && count < kMax) ptr[count] = p, bytes[count++] = n;
  }
};

// What a GEMM's epilogue applies after adding the bias (LtGemm::Linear,
// SplitKLinear). kBiasGelu (the erf form) only through LinearLayers::Run:
// cuBLASLt has no such epilogue (bias_gelu_gemm.h).
enum class Epilogue { kBias, kBiasGeluTanh, kBiasRelu, kBiasGelu };

struct EmbeddingArgs {
  const int32_t* ids;         // [tokens], validated against the vocabulary
  const int32_t* types;       // [tokens]
  const int32_t* cu_seqlens;  // [num_seqs + 1]
  int num_seqs;
  int num_tokens;
  const void* word;      // [vocab, hidden]
  const void* position;  // [max_pos, hidden]; null: none (rotary positions)
  const void* type;      // [type_vocab, hidden]
  const float* gamma;
  const float* beta;
  int hidden;
  float eps;
  void* out;  // [tokens, hidden]
};

// out[t] = LayerNorm(word[ids[t]] + position[t - start of its sequence] + type[types[t]]),
// without the position term where there is no table.
Status EmbedLayerNorm(Precision p, const EmbeddingArgs& a, Stream stream);

// out[r] = LayerNorm(in[r]) * gamma + beta; in may equal out.
Status LayerNorm(Precision p, const void* in, void* out, int rows, int hidden, const float* gamma,
                 const float* beta, float eps, Stream stream);

// x = act(x), x 16-byte aligned. The fp16/bf16 engines fuse gelu_new and relu into the GEMM
// epilogue and need this only for the erf GELU (cuBLASLt's GELU is the tanh
// form); the fp32 engine uses it for all three, to match the CPU engine's
// exact tanh.
Status ActivationInPlace(Precision p, HiddenAct act, void* x, size_t n, Stream stream);

// GeGLU (ModelConfig::gated_ffn): out[r, i] = act(in[r, i]) * in[r, inter + i]
// for in [rows, 2 inter] and out [rows, inter] (cpu::GatedGelu's definition),
// in fp32 arithmetic.
Status GatedActivation(Precision p, HiddenAct act, const void* in, int rows, int inter,
                       void* out, Stream stream);

// Rotary positions on Q and K of qkv [tokens, 3 hidden], in place
// (cpu::ApplyRotary's definition): the token at position p of its sequence
// is rotated by row p of `table` (RotaryTable, fp32 on the device), in fp32
// arithmetic.
Status ApplyRotary(Precision p, void* qkv, const int32_t* cu_seqlens, int num_seqs, int tokens,
                   int hidden, int heads, const float* table, Stream stream);

// Writes the GPU's global timer (nanoseconds) to *slot once every operation
// before it on `stream` has finished: a profiled forward's marks between
// operations. Launched plainly (never overlapped), so that it waits for the
// whole of the operation before it.
Status StampTime(uint64_t* slot, cudaStream_t stream);

Status ConvertFromFloat(Precision p, const float* in, void* out, size_t n, Stream stream);
Status ConvertToFloat(Precision p, const void* in, float* out, size_t n, Stream stream);
// out[i] = E4M3(in[i] / scale), one byte each, rounded to nearest even and
// saturating at +-448: an FP8 GEMM's input (LtGemm::LinearFp8).
Status QuantizeToE4M3(Precision p, const void* in, float scale, void* out, size_t n,
                      Stream stream);

// The compute capability this build's kernels run as on the current GPU
// (90 for sm_90): the GPU's own where the build has code for it, lower where
// the driver compiles an older architecture's PTX for it (a build for
// compute_75 on an H200). Device code is compiled per architecture, and the
// kernels' paths for newer ones (mma.sync from 80; griddepcontrol, wgmma
// and TMA from 90) are not in older code: the engine must dispatch on this,
// not on the GPU's capability, or it launches kernels whose bodies are empty
// and overlaps launches no kernel waits for. Read once per call by a
// one-thread kernel; synchronizes `stream`.
StatusOr<int> KernelComputeCapability(cudaStream_t stream);

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

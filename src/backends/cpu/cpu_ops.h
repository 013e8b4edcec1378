// The CPU encoder's kernels. Activations are row-major fp32 [tokens, width],
// sequences packed back to back (no padding) and delimited by cu_seqlens.
// Every op here computes a row the same way wherever it sits in the batch;
// the GEMMs (cpu_linear.h) may differ in the last bits with the row count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "bertrt/tensor.h"

namespace bertrt::cpu {

enum class Act { kNone, kGelu, kGeluTanh, kRelu, kTanh, kSigmoid };

// A Linear layer's weights (or several with the same input, concatenated
// along the output, e.g. Q, K and V) as W [out, in] row-major, the input to
// cpu::Linear::Create.
// A single layer points into the model's tensors (the engine keeps the model
// alive); a concatenation owns its copy. Move-only, so the pointers stay valid.
struct PackedLinear {
  PackedLinear() = default;
  PackedLinear(PackedLinear&&) = default;
  PackedLinear& operator=(PackedLinear&&) = default;
  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  int in = 0;
  int out = 0;
  const float* w = nullptr;  // [out, in]
  const float* b = nullptr;  // [out]
  std::vector<float> owned;  // storage of w and b when concatenated
};

// Packs the (weight [out_i, in], bias [out_i]) pairs, concatenated along the
// output; checks that every shape agrees with `in` and with its bias.
StatusOr<PackedLinear> PackLinear(const std::vector<const Tensor*>& weights,
                                  const std::vector<const Tensor*>& biases, int in,
                                  const char* name);

// x[r, :] = act(x[r, :] + bias) for r in [0, m); bias may be null.
void BiasAct(float* x, int m, int n, const float* bias, Act act, int threads);
// The same for one row, on the calling thread.
void BiasActRow(float* x, int n, const float* bias, Act act);

// out[r, :] = LayerNorm(in[r, :]) * gamma + beta; in may be out.
void LayerNorm(const float* in, float* out, int m, int n, const float* gamma, const float* beta,
               float eps, int threads);

struct EmbeddingTables {
  const float* word = nullptr;      // [vocab, h]
  const float* position = nullptr;  // [max_pos, h]; null: none (rotary positions)
  const float* type = nullptr;      // [type_vocab, h]
  const float* gamma = nullptr;
  const float* beta = nullptr;
};

// out[t] = LayerNorm(word[ids[t]] + position[t - start of its sequence] +
// type[types[t]]), with type row 0 for every token when `types` is null.
// Ids must already be validated.
void EmbedLayerNorm(const int32_t* ids, const int32_t* types, const int32_t* cu_seqlens,
                    int num_seqs, const EmbeddingTables& tables, int h, float eps, float* out,
                    int threads);

// Floats of scratch Attention needs.
size_t AttentionScratchFloats(int max_len, int threads);

// A relative position bias added to the scores (model/relative_position.h's
// table: [heads][2 * span - 1]); table null: none.
struct RelativeBias {
  const float* table = nullptr;
  int span = 0;
};

// Which keys each query sees: every one of its sequence, or (window > 0)
// only those within `window` positions of it (ModernBERT's local layers).
struct AttentionWindow {
  int window = 0;
};

// qkv [tokens, 3h] (Q | K | V, heads contiguous inside each) -> ctx [tokens, h]:
// per sequence and head, softmax(Q K^T / sqrt(head_dim) + bias) V over that
// sequence's own tokens only.
void Attention(const float* qkv, const int32_t* cu_seqlens, int num_seqs, int max_len, int h,
               int heads, const RelativeBias& bias, float* ctx, float* scratch, int threads,
               AttentionWindow window = {});

// Rotary position embedding (GPT-NeoX's halves, as transformers' ModernBERT
// applies it) on Q and K of qkv [tokens, 3h], in place: the pair (x[i],
// x[i + d/2]) of each head of the token at position p rotated by the angle
// whose (cos, sin) `table` holds (RotaryTable: every position of the batch).
void ApplyRotary(float* qkv, const int32_t* cu_seqlens, int num_seqs, int h, int heads,
                 const float* table, int threads);

// GeGLU: out[r, i] = act(in[r, i]) * in[r, inter + i] for in [rows, 2 inter]
// (transformers' chunk(2): the activated half first), act GELU (erf) or its
// tanh form.
void GatedGelu(const float* in, int rows, int inter, bool tanh_form, float* out, int threads);

// out[s] = x[first token of sequence s]; out may be x.
void GatherFirstTokens(const float* x, const int32_t* cu_seqlens, int num_seqs, int h,
                       float* out);

// Row s of out (`out_stride` floats apart; its first h written) = sequence
// s's rows of x pooled by `pooling`, as sentence-transformers pools them,
// from its token pool_start[s] on (RaggedBatch::pool_start; null: 0).
void PoolSequences(const float* x, const int32_t* cu_seqlens, const int32_t* pool_start,
                   int num_seqs, int h, Pooling pooling, float* out, int out_stride);

// Each row x / max(||x||_2, 1e-12).
void L2NormalizeRows(float* x, int m, int n);

// SPLADE's pooling of `rows` tokens' masked-LM logits ([rows, vocab], the
// batch's tokens first_token..first_token+rows-1): each value becomes
// log(1 + relu(v)) (log1p once more with log1p_twice) and is taken into its
// sequence's row of `out` ([seqs, vocab]) by max, or by sum with `sum`. `out`
// starts at zero and accumulates over calls, so the tokens may come in chunks.
void SpladePool(const float* logits, int first_token, int rows, const int32_t* cu_seqlens,
                int num_seqs, int vocab, bool sum, bool log1p_twice, float* out, int threads);

}  // namespace bertrt::cpu

// The encoder's op vocabulary: what a backend implements so that the one
// forward (model/encoder_forward.h) and its heads run on it. The forward is a
// template over the backend, so a call to an op is a direct call (inlined
// where the backend allows it): nothing indirect runs inside a CUDA graph's
// capture. Data is described here; each backend's ops class says how.
//
// Activations are row-major [rows, width] in the backend's compute precision
// (`Buf`: float* on the CPU, void* in the CUDA engine's fp16/bf16/fp32),
// sequences packed back to back with no padding and delimited by the batch's
// cu_seqlens; head results are fp32 (`float*`). A backend's ops object is
// made for one batch and one workspace, so the ops take no batch arguments.
//
// What a backend's ops class `B` provides (the EncoderOps concept checks the
// signatures):
//   types    B::Buf (mutable activations), B::ConstBuf, B::Layer (a layer's
//            weights: LinearWeights members qkv, attn_out, ffn_in, ffn_out and Norm
//            members attn_norm, ffn_norm), B::LinearWeights (a GEMM's weights),
//            B::SmallLinearWeights (a head's fp32 weights).
//   buffers  buffers(): the workspace's Buffers; At(buf, elements): the
//            element that many past buf.
//   encoder  EmbedLayerNorm, LayerNorm, Linear (bias, then an activation or a
//            residual: a Tail), Rotary, Attention, GatedActivation, GatherFirstTokens.
//   heads    PoolSequences, ConvertToFloat, ConvertFromFloat, ActivateToFloat,
//            LayerNormFloat, SmallLinear (from activations or fp32 rows),
//            DenseActivation, L2Normalize, ZeroFloat, SpladePool; BeginHead and
//            EndHead around them (a profiled CUDA forward times the head as one).
//   fast paths, asked through constants (`if constexpr`, so a backend
//            without one need not implement it):
//            kFirstQueryAttention: FirstQueryAttention, attention for each
//              sequence's first query alone (a compact last layer);
//            kSplitQuery: LinearOutputs, a Linear over a range of its outputs
//              (the compact last layer's Q for first tokens alone), and
//              SplitQueryPays(), whether the batch is large enough for it.
#pragma once

#include <concepts>
#include <cstddef>
#include <optional>

#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::ops {

// A LayerNorm's parameters (fp32, on the backend's device); gamma null: the
// norm is absent (a pre-norm model's first layer reads x itself). A
// LayerNorm's `feeds` (LayerNorm's last argument, may be null): the Linear
// that reads its output next; the output is written all the same (others
// read it too: the residual), and a backend may also make that Linear's
// input form of it in the same pass (the CUDA engine's E4M3 for an FP8
// Linear).
struct Norm {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  explicit operator bool() const { return gamma != nullptr; }
};

// What a Linear applies to x W^T + b before it writes y: an activation, or
// the residual [rows, out] added (never both: no layer has both).
// `feeds`, with an activation: the one Linear that reads y next, where
// nothing else reads y. A backend may then hand y to that Linear in its own
// input form and leave y itself unfinished or holding that form (the CUDA
// engine, where that Linear is FP8: y's E4M3 at its input scale, made in the
// GEMM's epilogue or the activation's pass).
template <class ConstBuf, class LinearWeights = void>
struct Tail {
  std::optional<HiddenAct> act;
  ConstBuf residual = nullptr;
  const LinearWeights* feeds = nullptr;

  static Tail Activation(HiddenAct a, const LinearWeights* feeds = nullptr) {
    return {a, nullptr, feeds};
  }
  static Tail Residual(ConstBuf r) { return {std::nullopt, r, nullptr}; }
};

// The workspace of one forward, in the backend's memory. Compute precision
// unless named fp32; sized by the backend for the batch:
//   x [tokens, hidden]      the hidden state (post-norm) or residual stream
//   qkv [tokens, 3 hidden]  Q | K | V (heads contiguous in each)
//   ctx, tmp [tokens, hidden]
//   inter [tokens, intermediate (x2 gated)], gated [tokens, intermediate]
//   mlm_logits [B::kMaskedLmChunkTokens, vocab]   SPLADE only
//   pooled, dense [seqs, widest pooled or Dense width] fp32
//   logits [tokens, labels] fp32, hidden [tokens, hidden] fp32 (may be x
//   itself where the precision is fp32), sparse [seqs, vocab] fp32
template <class Buf>
struct Buffers {
  Buf x{}, qkv{}, ctx{}, tmp{}, inter{}, gated{}, mlm_logits{};
  float *pooled = nullptr, *dense = nullptr, *logits = nullptr, *hidden = nullptr,
        *sparse = nullptr;
};

// The batch a forward runs over, as the ops see its size.
struct Batch {
  int tokens = 0;
  int seqs = 0;
  int max_len = 0;
  // The run returns the last layer's hidden states (all rows of it).
  bool hidden_state = false;
  // What the run returns reads only each sequence's first token of the last
  // layer (OutputsReadOnlyFirstTokens): its layer runs after attention on
  // those rows alone.
  bool first_tokens_only = false;
  // RunOptions::normalize: false leaves out the model's Normalize module.
  bool normalize = true;
};

// The signatures of the ops every backend implements (see the top).
template <class B>
concept EncoderOps = requires(B& o, const B& co, typename B::Buf buf, typename B::ConstBuf in,
                              const typename B::LinearWeights& linear,
                              const typename B::SmallLinearWeights& small,
                              const typename B::Layer& layer, float* f, const float* cf, Norm norm,
                              int n, size_t count, HiddenAct act, DenseActivation dense_act,
                              Pooling pooling, const char* name) {
  { co.buffers() } -> std::convertible_to<const Buffers<typename B::Buf>&>;
  { co.At(buf, count) } -> std::same_as<typename B::Buf>;
  { co.At(in, count) } -> std::same_as<typename B::ConstBuf>;
  { B::kMaskedLmChunkTokens } -> std::convertible_to<int>;
  { o.EmbedLayerNorm(buf) } -> std::same_as<Status>;
  { o.LayerNorm(in, buf, n, norm, &linear) } -> std::same_as<Status>;
  { o.Linear(name, linear, in, n, buf, Tail<typename B::ConstBuf, typename B::LinearWeights>{}) }
      -> std::same_as<Status>;
  { o.Rotary(buf, true) } -> std::same_as<Status>;
  // The layer (its weights, for a backend's prefetch); its local window each
  // side (0: global attention; the forward reads it from the config).
  { o.Attention(layer, n, in, buf) } -> std::same_as<Status>;
  { o.GatedActivation(in, n, buf) } -> std::same_as<Status>;
  { o.GatherFirstTokens(in, buf) } -> std::same_as<Status>;
  { o.PoolSequences(in, pooling, f, n) } -> std::same_as<Status>;
  { o.ConvertToFloat(in, f, count) } -> std::same_as<Status>;
  { o.ConvertFromFloat(cf, buf, count) } -> std::same_as<Status>;
  { o.ActivateToFloat(in, f, count, dense_act) } -> std::same_as<Status>;
  { o.LayerNormFloat(f, n, norm) } -> std::same_as<Status>;
  { o.SmallLinear(small, in, n, f) } -> std::same_as<Status>;
  { o.SmallLinearFloat(small, cf, n, f) } -> std::same_as<Status>;
  { o.DenseActivation(f, count, dense_act) } -> std::same_as<Status>;
  { o.L2Normalize(f, n, n) } -> std::same_as<Status>;
  { o.ZeroFloat(f, count) } -> std::same_as<Status>;
  { o.SpladePool(in, n, n, f) } -> std::same_as<Status>;
  { o.BeginHead() } -> std::same_as<void>;
  { o.EndHead() } -> std::same_as<Status>;
};

}  // namespace bertrt::ops

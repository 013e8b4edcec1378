// The encoder's forward and its heads, written once over the op vocabulary
// (ops/encoder_ops.h) and run by every backend: the embeddings and their
// LayerNorm; per layer the QKV Linear, rotary positions and attention (local
// windows, a relative position bias, as the model has them), the attention
// output Linear with the residual, LayerNorm, the FFN (plain or gated) with
// the residual and LayerNorm, post-norm (BERT) or pre-norm (ModernBERT); then
// the head. Which buffer each step reads and writes is decided here, so a
// backend keeps only what is its own: memory, kernels, staging, graphs.
//
// Where what a run returns reads only each sequence's first token (a pooler,
// CLS pooling), the last layer runs on those rows alone after its attention
// ("compact"): three quarters of its GEMM work gone. Backends with the fast
// paths (encoder_ops.h) also compute its attention, and its Q, for the first
// tokens alone.
#pragma once

#include <algorithm>
#include <cstddef>

#include "bertrt/head_outputs.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "model/weight_schema.h"
#include "ops/encoder_ops.h"

namespace bertrt::model {

// Where a sentence-embedding head leaves its rows: pooled, or dense after an
// odd number of Dense modules (they run from one to the other and back).
template <class Buf>
float* EmbeddingRows(const ModelConfig& config, const ops::Buffers<Buf>& b) {
  return config.dense.size() % 2 ? b.dense : b.pooled;
}

// Where the head leaves `array` (fp32, rows as DescribeOutputs says).
template <class Buf>
float* HeadArrayIn(const ModelConfig& config, const ops::Buffers<Buf>& b, HeadArray array) {
  switch (array) {
    case HeadArray::kPooler:
      return b.pooled;
    case HeadArray::kClassifier:
      return b.logits;
    case HeadArray::kSentenceEmbedding:
      return EmbeddingRows(config, b);
    case HeadArray::kHiddenState:
      return b.hidden;
    case HeadArray::kSparseEmbedding:
      return b.sparse;
  }
  return nullptr;
}

template <ops::EncoderOps Ops>
class EncoderForward {
 public:
  using Buf = typename Ops::Buf;
  using ConstBuf = typename Ops::ConstBuf;
  using Layer = typename Ops::Layer;
  using Tail = ops::Tail<ConstBuf, typename Ops::LinearWeights>;

  EncoderForward(const ModelConfig& config, const Weights<Ops>& weights, Ops& ops,
                 const ops::Batch& batch)
      : c_(config),
        w_(weights),
        ops_(ops),
        b_(ops.buffers()),
        batch_(batch),
        t_(batch.tokens),
        n_(batch.seqs),
        h_(config.hidden_size) {}

  // The whole forward: embeddings, every layer, the head.
  Status Run() {
    RETURN_IF_ERROR(ops_.EmbedLayerNorm(b_.x));
    const int layers = static_cast<int>(w_.layers.size());
    for (int i = 0; i < layers; ++i) {
      const bool compact = batch_.first_tokens_only && i + 1 == layers;
      const Layer& l = w_.layers[i];
      RETURN_IF_ERROR(c_.pre_norm ? PreNormLayer(l, i, compact) : PostNormLayer(l, i, compact));
    }
    if (c_.pre_norm) {
      const int rows = batch_.first_tokens_only ? n_ : t_;
      RETURN_IF_ERROR(ops_.LayerNorm(b_.x, b_.x, rows, w_.final_norm));
    }
    return Head();
  }

 private:
  // x = LayerNorm(x + Attention(x)); x = LayerNorm(x + FFN(x)).
  Status PostNormLayer(const Layer& l, int index, bool compact) {
    const int rows = compact ? n_ : t_;
    Buf sum;
    if (compact && SplitsQuery(index)) {
      ASSIGN_OR_RETURN(sum, SplitQueryAttentionBlock(l, index));
    } else {
      RETURN_IF_ERROR(ops_.Linear("gemm qkv", l.qkv, b_.x, t_, b_.qkv, {}));
      ASSIGN_OR_RETURN(sum, AttentionBlock(l, index, compact));
    }
    RETURN_IF_ERROR(ops_.LayerNorm(sum, b_.x, rows, l.attn_norm, &l.ffn_in));
    RETURN_IF_ERROR(Ffn(l, b_.x, rows, b_.x, b_.tmp));
    // The next layer's QKV reads x (a compact one through LinearOutputs: its
    // own weights' views, which the backend then quantizes for itself).
    const bool last = index + 1 == static_cast<int>(w_.layers.size());
    return ops_.LayerNorm(b_.tmp, b_.x, rows, l.ffn_norm,
                          last ? nullptr : &w_.layers[index + 1].qkv);
  }

  // x is the residual stream: x += Attention(LayerNorm(x)) (the first
  // layer's attention may read x itself), x += FFN(LayerNorm(x)); rotary
  // positions on Q and K where the model has them.
  Status PreNormLayer(const Layer& l, int index, bool compact) {
    const int rows = compact ? n_ : t_;
    ConstBuf in = b_.x;
    if (l.attn_norm) {
      RETURN_IF_ERROR(ops_.LayerNorm(b_.x, b_.tmp, t_, l.attn_norm, &l.qkv));
      in = b_.tmp;
    }
    RETURN_IF_ERROR(ops_.Linear("gemm qkv", l.qkv, in, t_, b_.qkv, {}));
    if (c_.rope_theta > 0.0f) RETURN_IF_ERROR(ops_.Rotary(b_.qkv, c_.local_layer(index)));
    ASSIGN_OR_RETURN(Buf sum, AttentionBlock(l, index, compact));
    // The residual stream is now `sum`; the other of tmp and ctx is free for
    // the FFN's LayerNorm.
    Buf normed = sum == b_.tmp ? b_.ctx : b_.tmp;
    RETURN_IF_ERROR(ops_.LayerNorm(sum, normed, rows, l.ffn_norm, &l.ffn_in));
    return Ffn(l, normed, rows, sum, b_.x);
  }

  // Attention over qkv, then its output Linear with x as the residual, into
  // tmp. Compact, the first rows alone: attention's lands in tmp and x's
  // first rows are gathered into qkv (free once attention has read it), the
  // sum into ctx. Returns where the sum went.
  StatusOr<Buf> AttentionBlock(const Layer& l, int index, bool compact) {
    Buf context = b_.ctx, sum = b_.tmp;
    ConstBuf skip = b_.x;
    if (compact && FirstQueriesOnly(index)) {
      if constexpr (Ops::kFirstQueryAttention)
        RETURN_IF_ERROR(ops_.FirstQueryAttention(&l, b_.qkv, 3 * h_, false, ops_.At(b_.qkv, h_),
                                                 3 * h_, b_.tmp));
    } else {
      RETURN_IF_ERROR(ops_.Attention(l, c_.local_layer(index) ? c_.local_window : 0, b_.qkv,
                                     b_.ctx));
      if (compact) RETURN_IF_ERROR(ops_.GatherFirstTokens(b_.ctx, b_.tmp));
    }
    if (compact) {
      RETURN_IF_ERROR(ops_.GatherFirstTokens(b_.x, b_.qkv));
      context = b_.tmp, skip = b_.qkv, sum = b_.ctx;
    }
    RETURN_IF_ERROR(ops_.Linear("gemm attn_out", l.attn_out, context, compact ? n_ : t_, sum,
                                Tail::Residual(skip)));
    return sum;
  }

  // AttentionBlock of a compact last layer whose Q is computed for the first
  // tokens alone: they are gathered from x into ctx (the output Linear's
  // residual after), their Q goes to qkv's last third, and K | V over every
  // token into its first two thirds, rows of 2 hidden. The sum goes to qkv.
  StatusOr<Buf> SplitQueryAttentionBlock(const Layer& l, int index) {
    if constexpr (Ops::kSplitQuery) {
      const Buf q = ops_.At(b_.qkv, size_t(t_) * 2 * h_);
      RETURN_IF_ERROR(ops_.GatherFirstTokens(b_.x, b_.ctx));
      RETURN_IF_ERROR(ops_.LinearOutputs("gemm qkv", l.qkv, 0, h_, b_.ctx, n_, q));
      RETURN_IF_ERROR(ops_.LinearOutputs("gemm qkv", l.qkv, h_, 2 * h_, b_.x, t_, b_.qkv));
      // No weights prefetched: the batch is large (SplitQueryPays).
      RETURN_IF_ERROR(ops_.FirstQueryAttention(nullptr, q, h_, true, b_.qkv, 2 * h_, b_.tmp));
      RETURN_IF_ERROR(
          ops_.Linear("gemm attn_out", l.attn_out, b_.tmp, n_, b_.qkv, Tail::Residual(b_.ctx)));
      return b_.qkv;
    } else {
      (void)l, (void)index;
      return Internal("the backend has no split-query path");
    }
  }

  // out = FFN(in) + residual over `rows` rows: the first Linear into inter
  // with the activation (or, gated, the gate's product into `gated`), the
  // second with the residual.
  Status Ffn(const Layer& l, ConstBuf in, int rows, ConstBuf residual, Buf out) {
    ConstBuf activated = b_.inter;
    if (c_.gated_ffn) {
      RETURN_IF_ERROR(ops_.Linear("gemm ffn_in", l.ffn_in, in, rows, b_.inter, {}));
      RETURN_IF_ERROR(ops_.GatedActivation(b_.inter, rows, b_.gated));
      activated = b_.gated;
    } else {
      RETURN_IF_ERROR(ops_.Linear("gemm ffn_in", l.ffn_in, in, rows, b_.inter,
                                  Tail::Activation(c_.hidden_act, &l.ffn_out)));
    }
    return ops_.Linear("gemm ffn_out", l.ffn_out, activated, rows, out, Tail::Residual(residual));
  }

  // Whether a compact layer's attention runs for the first queries alone:
  // the backend has that kernel, and the layer neither a relative position
  // bias (MPNet) nor a local window.
  bool FirstQueriesOnly(int index) const {
    if constexpr (Ops::kFirstQueryAttention) {
      return ops_.FirstQueryAttentionOn() && c_.relative_attention_buckets == 0 &&
             !c_.local_layer(index);
    } else {
      (void)index;
      return false;
    }
  }

  // Whether a compact post-norm layer also computes Q for the first tokens alone.
  bool SplitsQuery(int index) const {
    if constexpr (Ops::kSplitQuery) {
      return FirstQueriesOnly(index) && ops_.SplitQueryPays();
    } else {
      (void)index;
      return false;
    }
  }

  Status Head() {
    ops_.BeginHead();
    const bool pools = c_.head == HeadKind::kSequenceClassification || c_.head == HeadKind::kBase;
    if (w_.pooler && pools) RETURN_IF_ERROR(Pooler());
    switch (c_.head) {
      case HeadKind::kBase:
        break;
      case HeadKind::kSequenceClassification:
        RETURN_IF_ERROR(ops_.SmallLinearFloat(*w_.classifier, b_.pooled, n_, b_.logits));
        break;
      case HeadKind::kTokenClassification:
      case HeadKind::kQuestionAnswering: {
        // ModernBERT's prediction head on every token first (the same
        // transform as its masked-LM head's, whose activation it shares).
        ConstBuf tokens = b_.x;
        if (c_.prediction_head) {
          RETURN_IF_ERROR(Transform(b_.x, t_, *w_.pooler, w_.pooler_norm, b_.ctx));
          tokens = b_.ctx;
        }
        RETURN_IF_ERROR(ops_.SmallLinear(*w_.classifier, tokens, t_, b_.logits));
        break;
      }
      case HeadKind::kSentenceEmbedding:
        RETURN_IF_ERROR(SentenceEmbedding());
        break;
      case HeadKind::kSparseEmbedding:
        RETURN_IF_ERROR(Splade());
        break;
    }
    if (batch_.hidden_state) RETURN_IF_ERROR(ops_.ConvertToFloat(b_.x, b_.hidden, size_t(t_) * h_));
    return ops_.EndHead();
  }

  // pooled = act(first W^T + b) (then a prediction head's LayerNorm), first
  // each sequence's first token (rows 0..n-1 of x already when the encoder
  // kept only those) or the mean of its tokens (ModernBERT's
  // classifier_pooling "mean"). ctx and tmp are free once the encoder is done.
  Status Pooler() {
    ConstBuf first = b_.x;
    if (c_.classifier_mean_pooling) {
      // Through pooled into the compute precision; a classifier's batch has
      // no prompt (pool_start is 0).
      RETURN_IF_ERROR(ops_.PoolSequences(b_.x, Pooling::kMean, b_.pooled, h_));
      RETURN_IF_ERROR(ops_.ConvertFromFloat(b_.pooled, b_.ctx, size_t(n_) * h_));
      first = b_.ctx;
    } else if (!batch_.first_tokens_only) {
      RETURN_IF_ERROR(ops_.GatherFirstTokens(b_.x, b_.ctx));
      first = b_.ctx;
    }
    RETURN_IF_ERROR(ops_.Linear("pooler", *w_.pooler, first, n_, b_.tmp, {}));
    RETURN_IF_ERROR(ops_.ActivateToFloat(b_.tmp, b_.pooled, size_t(n_) * h_, c_.pooler_activation));
    if (w_.pooler_norm) RETURN_IF_ERROR(ops_.LayerNormFloat(b_.pooled, n_, w_.pooler_norm));
    return Status::Ok();
  }

  // Pooled rows, through the Dense modules (pooled to dense and back:
  // EmbeddingRows), normalized where the model normalizes and the run does
  // not ask for the vector before it.
  Status SentenceEmbedding() {
    int width = c_.pooled_width();
    if (batch_.first_tokens_only) {  // CLS pooling alone, of the compacted rows
      RETURN_IF_ERROR(ops_.ConvertToFloat(b_.x, b_.pooled, size_t(n_) * h_));
    } else {
      for (size_t k = 0; k < c_.pooling_modes.size(); ++k)
        RETURN_IF_ERROR(ops_.PoolSequences(b_.x, c_.pooling_modes[k], b_.pooled + k * h_, width));
    }
    for (size_t i = 0; i < c_.dense.size(); ++i) {
      const DenseSpec& d = c_.dense[i];
      const float* in = i % 2 ? b_.dense : b_.pooled;
      float* out = i % 2 ? b_.pooled : b_.dense;
      RETURN_IF_ERROR(ops_.SmallLinearFloat(w_.dense[i], in, n_, out));
      RETURN_IF_ERROR(ops_.DenseActivation(out, size_t(n_) * d.out_features, d.activation));
      width = d.out_features;
    }
    if (c_.normalize && batch_.normalize)
      RETURN_IF_ERROR(ops_.L2Normalize(EmbeddingRows(c_, b_), n_, width));
    return Status::Ok();
  }

  // SPLADE: the masked-LM head on every token, Ops::kMaskedLmChunkTokens at
  // a time (transform into ctx, the decoder's logits into mlm_logits), each
  // chunk pooled into sparse.
  Status Splade() {
    const int vocab = c_.vocab_size;
    RETURN_IF_ERROR(ops_.ZeroFloat(b_.sparse, size_t(n_) * vocab));
    for (int first = 0; first < t_; first += Ops::kMaskedLmChunkTokens) {
      const int rows = std::min(Ops::kMaskedLmChunkTokens, t_ - first);
      RETURN_IF_ERROR(
          Transform(ops_.At(b_.x, size_t(first) * h_), rows, *w_.mlm_dense, w_.mlm_norm, b_.ctx));
      RETURN_IF_ERROR(
          ops_.Linear("masked-LM decoder", *w_.mlm_decoder, b_.ctx, rows, b_.mlm_logits, {}));
      RETURN_IF_ERROR(ops_.SpladePool(b_.mlm_logits, first, rows, b_.sparse));
    }
    return Status::Ok();
  }

  // out = LayerNorm(act(x W^T + b)) over `rows` rows, through tmp: the
  // masked-LM head's transform and ModernBERT's prediction head.
  Status Transform(ConstBuf x, int rows, const typename Ops::LinearWeights& linear, ops::Norm norm,
                   Buf out) {
    RETURN_IF_ERROR(
        ops_.Linear("transform", linear, x, rows, b_.tmp, Tail::Activation(c_.mlm_activation)));
    return ops_.LayerNorm(b_.tmp, out, rows, norm);
  }

  const ModelConfig& c_;
  const Weights<Ops>& w_;
  Ops& ops_;
  const ops::Buffers<Buf>& b_;
  const ops::Batch batch_;
  const int t_, n_, h_;
};

}  // namespace bertrt::model

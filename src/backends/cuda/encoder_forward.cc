#include "backends/cuda/encoder_forward.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "bertrt/head_outputs.h"

namespace bertrt::cuda {
namespace {

// A batch of at most this many tokens (batch 1 at seq 128) has its attention
// kernels prefetch the layer's attention-output and FFN weights into L2 for
// the GEMMs after them. A GEMM at 128 rows reading its weights from HBM took
// 0.5-0.9 us longer than with them in L2 (BERT-base on the H200); batch 1 was
// 1.5-1.7% faster with the prefetch, batches of 256 to 1,024 tokens 0.5-1%
// slower, and larger ones 1.3-1.5% slower (bench/RESULTS.md, 2026-11-30).
constexpr int kPrefetchMaxTokens = 128;

// From this many tokens the last layer of a model whose head reads only
// first tokens computes Q for those alone (Pass::SplitQueryAttentionBlock):
// a third of that layer's QKV GEMM, for one more GEMM launch and a gather.
// On the H200 (bench/RESULTS.md, 2026-12-03) BERT-base at 4,096 tokens
// (batch 32) came out even, at 16,384 0.7% faster, BERT-large at 98,304
// 0.3 ms of 111 faster; below 4,096 the launch would cost about what the
// rows save (~3 us of GEMM at batch 8).
constexpr int kSplitQueryMinTokens = 4096;

}  // namespace

EncoderForward::EncoderForward(const ModelConfig& config,
                               const std::vector<OutputDescription>& outputs,
                               const CudaEngineOptions& options, const DeviceWeights& weights,
                               const LinearLayers& linear, int compute_capability, int sm_count,
                               bool overlap_launch)
    : config_(config),
      outputs_(outputs),
      options_(options),
      weights_(weights),
      linear_(linear),
      compute_capability_(compute_capability),
      sm_count_(sm_count),
      overlap_launch_(overlap_launch),
      ffn_epilogue_(FfnEpilogue(config, options)) {}

// One forward: the model's blocks over one shape and workspace. Each
// operation is enqueued by a method of its own, which also stamps the time
// after it when the forward is profiled.
class EncoderForward::Pass {
 public:
  Pass(const EncoderForward& f, const Shape& shape, const Workspace& ws, cudaStream_t stream,
       OpTrace* trace)
      : f_(f),
        c_(f.config_),
        p_(f.options_.precision),
        shape_(shape),
        ws_(ws),
        stream_(stream),
        kernels_{stream, f.overlap_launch_},
        trace_(trace),
        ints_(LayOutInts(ws.ints, shape)),
        t_(shape.tokens),
        n_(shape.seqs),
        h_(c_.hidden_size),
        e_(DTypeSize(PrecisionDType(p_))),
        // The outputs read only each sequence's first token of the last
        // layer (the pooler, CLS pooling; no hidden states asked for).
        first_tokens_only_(OutputsReadOnlyFirstTokens(f.outputs_, shape.hidden_state)),
        attention_(f.AttentionArgsFor(shape, ws)) {}

  Status Embed() {
    const DeviceWeights& w = f_.weights_;
    RETURN_IF_ERROR(EmbedLayerNorm(p_,
                                   {ints_.ids, ints_.types, ints_.cu, n_, t_, w.word, w.position,
                                    w.type, w.emb_gamma, w.emb_beta, h_, c_.layer_norm_eps, ws_.x},
                                   kernels_));
    return Stamp("embedding+layernorm", 0);
  }

  // In the last layer, a head that reads only each sequence's first token
  // needs only those rows after the QKV GEMM, in rows 0..n-1: attention for
  // the first queries alone, three quarters of the layer's GEMM work and the
  // LayerNorms shrink from t rows to n.
  Status Layer(const DeviceLayer& l, int index, bool last) {
    if (c_.pre_norm) return PreNormLayer(l, index, last);
    const bool compact = first_tokens_only_ && last;
    const int rows = compact ? n_ : t_;
    void* sum;
    // (Sequences of 4 tokens and more on average: the first tokens' rows, and
    // their Q behind K | V, fit in ctx and qkv however many dummies are empty.)
    if (compact && FirstQueriesOnly(index) && t_ >= kSplitQueryMinTokens && 4 * n_ <= t_) {
      ASSIGN_OR_RETURN(sum, SplitQueryAttentionBlock(l));
    } else {
      RETURN_IF_ERROR(Gemm("gemm qkv", ws_.x, t_, h_, l.qkv_w, l.qkv_b, 3 * h_, Epilogue::kBias,
                           nullptr, ws_.qkv));
      ASSIGN_OR_RETURN(sum, AttentionBlock(l, index, compact));
    }
    RETURN_IF_ERROR(Norm(sum, ws_.x, rows, l.attn_gamma, l.attn_beta));
    RETURN_IF_ERROR(Ffn(l, ws_.x, rows, ws_.x, ws_.tmp));
    return Norm(ws_.tmp, ws_.x, rows, l.ffn_gamma, l.ffn_beta);
  }

  // A pre-LayerNorm layer (ModelConfig::pre_norm): x is the residual stream,
  // each block reads its LayerNorm (the first layer's attention reads x
  // itself) and adds into it through its last GEMM's C operand; rotary
  // positions on Q and K, and a local window in the local layers. Compact as
  // Layer.
  Status PreNormLayer(const DeviceLayer& l, int index, bool last) {
    const bool compact = first_tokens_only_ && last;
    const int rows = compact ? n_ : t_;
    const void* in = ws_.x;
    if (l.attn_gamma) {
      RETURN_IF_ERROR(Norm(ws_.x, ws_.tmp, t_, l.attn_gamma, l.attn_beta));
      in = ws_.tmp;
    }
    RETURN_IF_ERROR(
        Gemm("gemm qkv", in, t_, h_, l.qkv_w, l.qkv_b, 3 * h_, Epilogue::kBias, nullptr, ws_.qkv));
    if (c_.rope_theta > 0.0f) RETURN_IF_ERROR(Rotary(c_.local_layer(index)));
    ASSIGN_OR_RETURN(void* sum, AttentionBlock(l, index, compact));
    // The residual stream is now `sum`; the other of tmp and ctx is free for
    // the FFN's LayerNorm.
    void* normed = sum == ws_.tmp ? ws_.ctx : ws_.tmp;
    RETURN_IF_ERROR(Norm(sum, normed, rows, l.ffn_gamma, l.ffn_beta));
    RETURN_IF_ERROR(Ffn(l, normed, rows, sum, ws_.x));
    if (!last) return Status::Ok();
    return Norm(ws_.x, ws_.x, rows, f_.weights_.final_gamma, f_.weights_.final_beta);
  }

  // Attention of layer l over qkv, then its output GEMM with x as the
  // residual (through the GEMM's C operand, beta = 1) into tmp. Compact, the
  // first rows alone into ctx: attention's for the first queries land in
  // tmp, and x's are gathered into qkv, free once attention has read it.
  // Returns where the sum went.
  StatusOr<void*> AttentionBlock(const DeviceLayer& l, int index, bool compact) {
    void *context = ws_.ctx, *sum = ws_.tmp;
    const void* skip = ws_.x;
    RETURN_IF_ERROR(Attention(l, index, compact));
    if (compact) {
      RETURN_IF_ERROR(GatherFirstTokens(ws_.x, ws_.qkv));
      context = ws_.tmp, skip = ws_.qkv, sum = ws_.ctx;
    }
    RETURN_IF_ERROR(Gemm("gemm attn_out", context, compact ? n_ : t_, h_, l.attn_out_w,
                         l.attn_out_b, h_, Epilogue::kBias, skip, sum));
    return sum;
  }

  // AttentionBlock of a compact last layer whose attention runs for the first
  // queries alone, with Q computed for the first tokens alone: they are
  // gathered from x into ctx (the attention output GEMM's residual after),
  // their Q goes to qkv's last third, and the K | V GEMM over every token
  // into its first two thirds, rows of 2 * hidden (qkv's weights and bias
  // are Q's, K's and V's one after another). The sum goes to qkv.
  StatusOr<void*> SplitQueryAttentionBlock(const DeviceLayer& l) {
    char* const qkv = static_cast<char*>(ws_.qkv);
    void* const q = qkv + size_t(t_) * 2 * h_ * e_;
    RETURN_IF_ERROR(GatherFirstTokens(ws_.x, ws_.ctx));
    RETURN_IF_ERROR(
        Gemm("gemm qkv", ws_.ctx, n_, h_, l.qkv_w, l.qkv_b, h_, Epilogue::kBias, nullptr, q));
    RETURN_IF_ERROR(Gemm(
        "gemm qkv", ws_.x, t_, h_, static_cast<const char*>(l.qkv_w) + size_t(h_) * h_ * e_,
        static_cast<const char*>(l.qkv_b) + size_t(h_) * e_, 2 * h_, Epilogue::kBias, nullptr, qkv));
    RETURN_IF_ERROR(
        FirstQueries(q, h_, true, qkv, 2 * h_, {}));  // no prefetch past kPrefetchMaxTokens
    RETURN_IF_ERROR(Gemm("gemm attn_out", ws_.tmp, n_, h_, l.attn_out_w, l.attn_out_b, h_,
                         Epilogue::kBias, ws_.ctx, qkv));
    return static_cast<void*>(qkv);
  }

  // out = FFN(in) + residual over `rows` rows: the first GEMM into inter,
  // the activation in its epilogue or a kernel after it (or the gate's
  // product into `gated`), the second GEMM with the residual as its C operand.
  Status Ffn(const DeviceLayer& l, const void* in, int rows, const void* residual, void* out) {
    const int inter = c_.intermediate_size, width = c_.gated_ffn ? 2 * inter : inter;
    RETURN_IF_ERROR(Gemm("gemm ffn_in", in, rows, h_, l.ffn_in_w, l.ffn_in_b, width,
                         f_.ffn_epilogue_, nullptr, ws_.inter));
    const void* activated = ws_.inter;
    if (c_.gated_ffn) {
      RETURN_IF_ERROR(GatedActivation(p_, c_.hidden_act, ws_.inter, rows, inter, ws_.gated,
                                      kernels_));
      RETURN_IF_ERROR(Stamp("gated activation", 0));
      activated = ws_.gated;
    } else if (f_.ffn_epilogue_ == Epilogue::kBias) {
      RETURN_IF_ERROR(Activation(rows * size_t(inter)));
    }
    return Gemm("gemm ffn_out", activated, rows, inter, l.ffn_out_w, l.ffn_out_b, h_,
                Epilogue::kBias, residual, out);
  }

  // The head's kernels, timed as one operation.
  Status Head() {
    const DeviceWeights& w = f_.weights_;
    const int32_t* cu = ints_.cu;
    const bool pools =
        c_.head == HeadKind::kSequenceClassification || c_.head == HeadKind::kBase;
    if (w.pooler_w && pools) {
      // ctx and tmp are free once the encoder is done; rows 0..n-1 of x
      // already hold the first tokens when the encoder kept only those.
      const void* first = ws_.x;
      if (c_.classifier_mean_pooling) {
        // The mean of each sequence's tokens (ModernBERT's classifier_pooling
        // "mean"), through pooled_f32 into the compute precision. A
        // classifier's batch has no prompt: pool_start is 0.
        RETURN_IF_ERROR(PoolSequences(p_, ws_.x, cu, ints_.pool_start, n_, h_, Pooling::kMean,
                                      ws_.pooled_f32, h_, kernels_));
        RETURN_IF_ERROR(ConvertFromFloat(p_, ws_.pooled_f32, ws_.ctx, size_t(n_) * h_, kernels_));
        first = ws_.ctx;
      } else if (!first_tokens_only_) {
        RETURN_IF_ERROR(cuda::GatherFirstTokens(p_, ws_.x, cu, n_, h_, ws_.ctx, kernels_));
        first = ws_.ctx;
      }
      RETURN_IF_ERROR(f_.linear_.Run(first, n_, h_, w.pooler_w, w.pooler_b, h_, Epilogue::kBias,
                                     nullptr, ws_.tmp, stream_));
      RETURN_IF_ERROR(ActivateToFloat(p_, ws_.tmp, ws_.pooled_f32, size_t(n_) * h_,
                                      c_.pooler_activation, kernels_));
      // ModernBERT's prediction head ends in a LayerNorm, here on fp32 rows.
      if (w.pooler_gamma)
        RETURN_IF_ERROR(LayerNorm(Precision::kFp32, ws_.pooled_f32, ws_.pooled_f32, n_, h_,
                                  w.pooler_gamma, w.pooler_beta, c_.layer_norm_eps, kernels_));
    }
    switch (c_.head) {
      case HeadKind::kBase:
        break;
      case HeadKind::kSequenceClassification:
        RETURN_IF_ERROR(SmallLinear(Precision::kFp32, ws_.pooled_f32, n_, h_, w.classifier_w,
                                    w.classifier_b, w.classifier_out, ws_.logits_f32, kernels_));
        break;
      case HeadKind::kTokenClassification:
      case HeadKind::kQuestionAnswering: {
        // ModernBERT's prediction head on every token first (the same
        // transform as its masked-LM head's, whose activation it shares).
        const void* tokens = ws_.x;
        if (w.pooler_w) {
          RETURN_IF_ERROR(Transform(ws_.x, t_, w.pooler_w, w.pooler_b, c_.mlm_activation,
                                    w.pooler_gamma, w.pooler_beta, ws_.ctx));
          tokens = ws_.ctx;
        }
        RETURN_IF_ERROR(SmallLinear(p_, tokens, t_, h_, w.classifier_w, w.classifier_b,
                                    w.classifier_out, ws_.logits_f32, kernels_));
        break;
      }
      case HeadKind::kSentenceEmbedding: {
        int width = c_.pooled_width();
        if (first_tokens_only_) {  // CLS pooling alone, of the compacted rows
          RETURN_IF_ERROR(ConvertToFloat(p_, ws_.x, ws_.pooled_f32, size_t(n_) * h_, kernels_));
        } else {
          for (size_t k = 0; k < c_.pooling_modes.size(); ++k)
            RETURN_IF_ERROR(PoolSequences(p_, ws_.x, cu, ints_.pool_start, n_, h_,
                                          c_.pooling_modes[k],
                                          ws_.pooled_f32 + k * h_, width, kernels_));
        }
        // Dense modules from pooled_f32 to dense_f32 and back (EmbeddingRows).
        for (size_t i = 0; i < c_.dense.size(); ++i) {
          const DenseSpec& d = c_.dense[i];
          float* in = i % 2 ? ws_.dense_f32 : ws_.pooled_f32;
          float* out = i % 2 ? ws_.pooled_f32 : ws_.dense_f32;
          RETURN_IF_ERROR(SmallLinear(Precision::kFp32, in, n_, width, w.dense[i].w, w.dense[i].b,
                                      d.out_features, out, kernels_));
          RETURN_IF_ERROR(
              ApplyDenseActivation(out, size_t(n_) * d.out_features, d.activation, kernels_));
          width = d.out_features;
        }
        if (c_.normalize)
          RETURN_IF_ERROR(L2NormalizeRows(f_.EmbeddingRows(ws_), n_, width, kernels_));
        break;
      }
      case HeadKind::kSparseEmbedding:
        RETURN_IF_ERROR(Splade());
        break;
    }
    if (shape_.hidden_state)
      RETURN_IF_ERROR(ConvertToFloat(p_, ws_.x, ws_.hidden_f32, size_t(t_) * h_, kernels_));
    return Stamp("head", 0);
  }

 private:
  // SPLADE: the masked-LM head on every token, kMaskedLmChunkTokens at a
  // time (transform into tmp, its LayerNorm into ctx, the decoder's logits
  // into mlm_logits), each chunk pooled into sparse_f32.
  Status Splade() {
    const DeviceWeights& w = f_.weights_;
    const int vocab = c_.vocab_size;
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(ws_.sparse_f32, 0, size_t(n_) * vocab * sizeof(float), stream_));
    for (int first = 0; first < t_; first += kMaskedLmChunkTokens) {
      const int rows = std::min(kMaskedLmChunkTokens, t_ - first);
      const void* x = static_cast<const char*>(ws_.x) + size_t(first) * h_ * e_;
      RETURN_IF_ERROR(Transform(x, rows, w.mlm_dense_w, w.mlm_dense_b, c_.mlm_activation,
                                w.mlm_gamma, w.mlm_beta, ws_.ctx));
      RETURN_IF_ERROR(f_.linear_.Run(ws_.ctx, rows, h_, w.mlm_decoder_w, w.mlm_decoder_b, vocab,
                                     Epilogue::kBias, nullptr, ws_.mlm_logits, stream_));
      RETURN_IF_ERROR(SpladePool(p_, ws_.mlm_logits, first, rows, ints_.cu, n_, vocab,
                                 c_.splade_sum, c_.splade_log1p_twice, ws_.sparse_f32, kernels_));
    }
    return Status::Ok();
  }

  // out = LayerNorm(act(x W^T + b)) over `rows` rows, through tmp: the
  // masked-LM head's transform and ModernBERT's prediction head.
  Status Transform(const void* x, int rows, const void* weight, const void* bias, HiddenAct act,
                   const float* gamma, const float* beta, void* out) {
    const Epilogue epilogue = ActivationEpilogue(act, f_.options_);
    RETURN_IF_ERROR(
        f_.linear_.Run(x, rows, h_, weight, bias, h_, epilogue, nullptr, ws_.tmp, stream_));
    if (epilogue == Epilogue::kBias)
      RETURN_IF_ERROR(ActivationInPlace(p_, act, ws_.tmp, size_t(rows) * h_, kernels_));
    return LayerNorm(p_, ws_.tmp, out, rows, h_, gamma, beta, c_.layer_norm_eps, kernels_);
  }

  Status Stamp(const char* name, double flops) {
    return trace_ ? trace_->After(name, flops, stream_) : Status::Ok();
  }

  // y = act(x W^T + bias [+ residual]); FLOPs counted 2 per multiply-add.
  Status Gemm(const char* name, const void* x, int rows, int in, const void* w, const void* bias,
              int out, Epilogue epilogue, const void* residual, void* y) {
    RETURN_IF_ERROR(f_.linear_.Run(x, rows, in, w, bias, out, epilogue, residual, y, stream_));
    return Stamp(name, 2.0 * rows * in * out);
  }

  // Attention over qkv into ctx, or (compact, CudaEngineOptions::
  // first_query_attention) the first queries' alone into tmp. Its FLOPs
  // count QK^T and PV over the padded longest length: an upper bound.
  Status Attention(const DeviceLayer& l, int index, bool compact) {
    AttentionArgs a = attention_;  // with this layer's prefetch
    const bool local = c_.local_layer(index);
    if (local) a.local_window = c_.local_window;
    // See kPrefetchMaxTokens.
    if (t_ <= kPrefetchMaxTokens) {
      const size_t inter = c_.intermediate_size;
      a.prefetch.Add(l.attn_out_w, size_t(h_) * h_ * e_);
      a.prefetch.Add(l.ffn_in_w, inter * h_ * e_);
      a.prefetch.Add(l.ffn_out_w, h_ * inter * e_);
    }
    if (compact && FirstQueriesOnly(index))
      return FirstQueries(ws_.qkv, 3 * h_, false, static_cast<const char*>(ws_.qkv) + h_ * e_,
                          3 * h_, a.prefetch);
    RETURN_IF_ERROR(cuda::Attention(p_, a, kernels_));
    const double keys = local ? std::min(shape_.max_len, 2 * c_.local_window + 1) : shape_.max_len;
    RETURN_IF_ERROR(Stamp("attention", 4.0 * n_ * shape_.max_len * keys * h_));
    return compact ? GatherFirstTokens(ws_.ctx, ws_.tmp) : Status::Ok();
  }

  // Whether a compact layer's attention runs for the first queries alone:
  // the first-query kernel has no relative position bias (MPNet) and no
  // local window.
  bool FirstQueriesOnly(int index) const {
    return f_.options_.first_query_attention && !f_.weights_.relative_bias &&
           !c_.local_layer(index);
  }

  // The first queries' attention into tmp, rows 0..n-1 (FirstQueryAttentionArgs
  // says how q and kv are laid out).
  Status FirstQueries(const void* q, int q_ld, bool q_by_sequence, const void* kv, int kv_ld,
                      const PrefetchRanges& prefetch) {
    RETURN_IF_ERROR(FirstQueryAttention(p_,
                                        {q, q_ld, q_by_sequence, kv, kv_ld, ints_.cu, n_,
                                         shape_.max_len, h_, c_.num_heads, ws_.tmp, prefetch},
                                        kernels_));
    return Stamp("attention", 4.0 * n_ * shape_.max_len * h_);
  }

  // Each sequence's first row of `from` into rows 0..n-1 of `to`.
  Status GatherFirstTokens(const void* from, void* to) {
    RETURN_IF_ERROR(cuda::GatherFirstTokens(p_, from, ints_.cu, n_, h_, to, kernels_));
    return Stamp("gather first tokens", 0);
  }

  // out = LayerNorm(in) over `rows` rows; in may be out.
  Status Norm(const void* in, void* out, int rows, const float* gamma, const float* beta) {
    RETURN_IF_ERROR(LayerNorm(p_, in, out, rows, h_, gamma, beta, c_.layer_norm_eps, kernels_));
    return Stamp("layernorm", 0);
  }

  // Rotary positions on qkv's Q and K, with the local or the global theta.
  Status Rotary(bool local) {
    const DeviceWeights& w = f_.weights_;
    RETURN_IF_ERROR(ApplyRotary(p_, ws_.qkv, ints_.cu, n_, t_, h_, c_.num_heads,
                                local ? w.rotary_local : w.rotary_global, kernels_));
    return Stamp("rotary", 0);
  }

  // The FFN's activation over `count` values of inter, where its GEMM's
  // epilogue did not apply it.
  Status Activation(size_t count) {
    RETURN_IF_ERROR(ActivationInPlace(p_, c_.hidden_act, ws_.inter, count, kernels_));
    return Stamp("activation", 0);
  }

  const EncoderForward& f_;
  const ModelConfig& c_;
  const Precision p_;
  const Shape& shape_;
  const Workspace& ws_;
  const cudaStream_t stream_;
  const Stream kernels_;
  OpTrace* const trace_;
  const BatchInts ints_;
  const int t_, n_, h_;
  const size_t e_;  // bytes of one activation or weight element
  const bool first_tokens_only_;
  const AttentionArgs attention_;  // every layer's, but for the weights it prefetches
};

Status EncoderForward::Run(const Shape& shape, const Workspace& ws, cudaStream_t stream,
                           OpTrace* trace) const {
  Pass pass(*this, shape, ws, stream, trace);
  RETURN_IF_ERROR(pass.Embed());
  const int layers = static_cast<int>(weights_.layers.size());
  for (int i = 0; i < layers; ++i)
    RETURN_IF_ERROR(pass.Layer(weights_.layers[i], i, i + 1 == layers));
  return pass.Head();
}

AttentionArgs EncoderForward::AttentionArgsFor(const Shape& shape, const Workspace& ws) const {
  const BatchInts ints = LayOutInts(ws.ints, shape);
  AttentionArgs a{ws.qkv,        ints.by_length,      shape.seqs,
                  shape.max_len, config_.hidden_size, config_.num_heads,
                  ws.ctx,        compute_capability_, sm_count_};
  a.tokens = shape.tokens;
  a.allow_tma = options_.tma_attention;
  a.position_bias = weights_.relative_bias;
  a.bias_span = config_.max_positions();
  // Packed windows bound each row's keys by its sequence alone, which a
  // local window would also have to.
  if (options_.attention_windows && config_.local_window == 0 &&
      AttentionTakesWindows(options_.precision, a))
    a.row_bounds = ints.row_bounds;
  return a;
}

float* EncoderForward::EmbeddingRows(const Workspace& ws) const {
  return config_.dense.size() % 2 ? ws.dense_f32 : ws.pooled_f32;
}

const float* EncoderForward::DeviceArray(const Workspace& ws, HeadArray array) const {
  switch (array) {
    case HeadArray::kPooler:
      return ws.pooled_f32;
    case HeadArray::kClassifier:
      return ws.logits_f32;
    case HeadArray::kSentenceEmbedding:
      return EmbeddingRows(ws);
    case HeadArray::kHiddenState:
      return ws.hidden_f32;
    case HeadArray::kSparseEmbedding:
      return ws.sparse_f32;
  }
  return nullptr;
}

}  // namespace bertrt::cuda

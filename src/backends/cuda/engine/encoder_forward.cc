#include "backends/cuda/engine/encoder_forward.h"

#include <algorithm>

#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/ops/heads.h"
#include "backends/cuda/ops/layernorm.h"
#include "backends/cuda/util/cuda_check.h"
#include "bertrt/head_outputs.h"
#include "model/encoder_forward.h"

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
// first tokens computes Q for those alone (model::EncoderForward's
// SplitQueryAttentionBlock): a third of that layer's QKV GEMM, for one more
// GEMM launch and a gather.
// On the H200 (bench/RESULTS.md, 2026-12-03) BERT-base at 4,096 tokens
// (batch 32) came out even, at 16,384 0.7% faster, BERT-large at 98,304
// 0.3 ms of 111 faster; below 4,096 the launch would cost about what the
// rows save (~3 us of GEMM at batch 8).
constexpr int kSplitQueryMinTokens = 4096;

}  // namespace

EncoderForward::EncoderForward(const ModelConfig& config,
                               const std::vector<OutputDescription>& outputs,
                               const CudaEngineOptions& options, const Tuning& tuning,
                               const DeviceWeights& weights, const LinearLayers& linear,
                               int compute_capability, int sm_count, bool overlap_launch)
    : config_(config),
      outputs_(outputs),
      weights_(weights),
      ops_context_{config, options, tuning, weights, linear, overlap_launch},
      compute_capability_(compute_capability),
      sm_count_(sm_count),
      ffn_epilogue_(FfnEpilogue(config, options)) {}

ops::Buffers<void*> BuffersOf(const Workspace& ws) {
  return {.x = ws.x, .qkv = ws.qkv, .ctx = ws.ctx, .tmp = ws.tmp, .inter = ws.inter,
          .gated = ws.gated, .mlm_logits = ws.mlm_logits, .pooled = ws.pooled_f32,
          .dense = ws.dense_f32, .logits = ws.logits_f32, .hidden = ws.hidden_f32,
          .sparse = ws.sparse_f32};
}

EncoderOps::EncoderOps(const OpsContext& context, const Shape& shape, const Workspace& ws,
                       const AttentionArgs& attention, cudaStream_t stream, OpTrace* trace)
    : c_(context),
      config_(context.config),
      p_(context.options.precision),
      shape_(shape),
      buffers_(BuffersOf(ws)),
      attention_(attention),
      stream_(stream),
      kernels_{stream, context.overlap_launch},
      trace_(trace),
      ints_(LayOutInts(ws.ints, shape)),
      t_(shape.tokens),
      n_(shape.seqs),
      h_(context.config.hidden_size),
      e_(DTypeSize(PrecisionDType(p_))),
      input8_(ws.input8),
      input8_scales_(ws.input8_scales),
      input8_zeros_(ws.input8_zeros) {}

Status EncoderOps::EmbedLayerNorm(void* out) {
  const DeviceWeights& w = c_.weights;
  RETURN_IF_ERROR(
      cuda::EmbedLayerNorm(p_,
                           {ints_.ids, ints_.types, ints_.cu, n_, t_, w.word, w.position, w.type,
                            w.forward.embedding_norm.gamma, w.forward.embedding_norm.beta, h_, config_.layer_norm_eps, out},
                           kernels_));
  return Stamp("embedding+layernorm", 0);
}

Status EncoderOps::LayerNorm(const void* in, void* out, int rows, ops::Norm norm,
                             const DeviceLinear* feeds) {
  E4M3Output e4m3;
  Uint8Output u8;
  if (c_.tuning.fused_quantization && feeds && input8_) {
    if (feeds->fp8()) e4m3 = {input8_, feeds->input_scale};
    if (feeds->int8())
      u8 = {input8_, feeds->input_multipliers, feeds->input_scale, input8_scales_, input8_zeros_};
  }
  RETURN_IF_ERROR(cuda::LayerNorm(p_, in, out, rows, h_, norm.gamma, norm.beta,
                                  config_.layer_norm_eps, kernels_, e4m3, u8));
  input8_image_ = {};  // out rewritten (and input8_, where e4m3.bytes or u8.bytes)
  if (e4m3.bytes || u8.bytes) input8_image_ = {out, feeds};
  return Stamp("layernorm", 0);
}

// y = x W^T + b, then the activation (in the GEMM's epilogue where it can
// be, else a kernel after it) or + residual. FLOPs counted 2 per multiply-add.
Status EncoderOps::Linear(const char* name, const DeviceLinear& w, const void* x, int rows, void* y,
                          ops::Tail<const void*, DeviceLinear> tail) {
  const Epilogue epilogue = tail.act ? ActivationEpilogue(*tail.act, c_.options) : Epilogue::kBias;
  const double flops = 2.0 * rows * w.in * w.out;
  if (w.int8()) {
    // int8: the input onto uint8, each row with its scale and zero point,
    // unless the op before made it, then the int8 GEMM.
    if (!input8_) return Internal("cuda engine: an int8 Linear without room for its input");
    const bool made = Input8MadeFor(x, w);
    input8_image_ = {};
    if (!made) {
      RETURN_IF_ERROR(QuantizeRowsToUint8(p_, x, rows, w.in, w.input_multipliers, w.input_scale,
                                          input8_, input8_scales_, input8_zeros_, kernels_));
      RETURN_IF_ERROR(Stamp("int8 quantization", 0));
    }
    RETURN_IF_ERROR(c_.linear.RunInt8(
        {.x = static_cast<const uint8_t*>(input8_), .row_scales = input8_scales_,
         .row_zeros = input8_zeros_, .rows = rows, .in = w.in,
         .w = static_cast<const int8_t*>(w.w8), .weight_scales = w.weight_scales,
         .weight_sums = w.weight_sums, .bias = w.b, .out = w.out, .residual = tail.residual,
         .y = y},
        epilogue, stream_));
    // (The activation, where not the erf GELU, ran after the GEMM.)
    return Stamp(name, flops);
  }
  if (w.fp8()) {
    // fp8: the input onto E4M3 with its calibrated scale, unless the op
    // before made it, then the FP8 GEMM.
    if (!input8_) return Internal("cuda engine: an fp8 Linear without room for its input");
    const void* x8 = input8_;
    const bool made = Input8MadeFor(x, w);
    input8_image_ = {};
    if (!made)
      RETURN_IF_ERROR(QuantizeToE4M3(p_, x, w.input_scale, input8_, size_t(rows) * w.in,
                                     kernels_));
    const float scale = w.input_scale * w.weight_scale;
    if (c_.tuning.fused_quantization && epilogue == Epilogue::kBiasGelu && tail.feeds &&
        tail.feeds->fp8())
      return Fp8GeluFeedingFp8(name, w, x8, scale, rows, y, *tail.feeds);
    RETURN_IF_ERROR(c_.linear.RunFp8(x8, rows, w.in, w.w8, scale, w.b, w.out, epilogue,
                                     tail.residual, y, stream_));
  } else {
    RETURN_IF_ERROR(
        c_.linear.Run(x, rows, w.in, w.w, w.b, w.out, epilogue, tail.residual, y, stream_));
  }
  RETURN_IF_ERROR(Stamp(name, flops));
  if (!tail.act || epilogue != Epilogue::kBias) return Status::Ok();
  RETURN_IF_ERROR(ActivationInPlace(p_, *tail.act, y, size_t(rows) * w.out, kernels_));
  return Stamp("activation", 0);
}

// An erf GELU (never in cuBLASLt's FP8 epilogue) whose output only an FP8
// Linear reads (Tail::feeds): the GELU's pass makes that Linear's E4M3
// input (into input8_), and y is never written in 16 bits after the GELU
// (Tuning::fused_quantization).
Status EncoderOps::Fp8GeluFeedingFp8(const char* name, const DeviceLinear& w, const void* x8,
                                     float scale, int rows, void* y, const DeviceLinear& next) {
  const double flops = 2.0 * rows * w.in * w.out;
  RETURN_IF_ERROR(c_.linear.RunFp8(x8, rows, w.in, w.w8, scale, w.b, w.out, Epilogue::kBias,
                                   nullptr, y, stream_));
  RETURN_IF_ERROR(Stamp(name, flops));
  RETURN_IF_ERROR(ActivateToE4M3(p_, HiddenAct::kGelu, y, next.input_scale, input8_,
                                 size_t(rows) * w.out, kernels_));
  input8_image_ = {y, &next};
  return Stamp("activation", 0);
}

Status EncoderOps::LinearOutputs(const char* name, const DeviceLinear& w, int first, int count,
                                 const void* x, int rows, void* y) {
  return Linear(name, w.Outputs(first, count, e_), x, rows, y, {});
}

Status EncoderOps::Rotary(void* qkv, bool local) {
  const DeviceWeights& w = c_.weights;
  RETURN_IF_ERROR(ApplyRotary(p_, qkv, ints_.cu, n_, t_, h_, config_.num_heads,
                              local ? w.rotary_local : w.rotary_global, kernels_));
  return Stamp("rotary", 0);
}

PrefetchRanges EncoderOps::PrefetchFor(const DeviceLayer& l) const {
  PrefetchRanges prefetch;
  // See kPrefetchMaxTokens.
  if (t_ <= kPrefetchMaxTokens) {
    // (A gated FFN's first weight is twice `inter` rows: its first half.)
    const size_t inter = config_.intermediate_size;
    auto bytes = [&](const DeviceLinear& w, size_t n) { return n * (w.w8 ? 1 : e_); };
    prefetch.Add(l.attn_out.weight(), bytes(l.attn_out, size_t(h_) * h_));
    prefetch.Add(l.ffn_in.weight(), bytes(l.ffn_in, inter * h_));
    prefetch.Add(l.ffn_out.weight(), bytes(l.ffn_out, h_ * inter));
  }
  return prefetch;
}

// Its FLOPs count QK^T and PV over the padded longest length: an upper bound.
Status EncoderOps::Attention(const DeviceLayer& l, int local_window, const void* qkv,
                             void* ctx) {
  AttentionArgs a = attention_;
  a.qkv = qkv;
  a.ctx = ctx;
  a.local_window = local_window;
  a.prefetch = PrefetchFor(l);
  RETURN_IF_ERROR(cuda::Attention(p_, a, kernels_));
  const double keys =
      local_window > 0 ? std::min(shape_.max_len, 2 * local_window + 1) : shape_.max_len;
  return Stamp("attention", 4.0 * n_ * shape_.max_len * keys * h_);
}

Status EncoderOps::FirstQueryAttention(const DeviceLayer* prefetch_for, const void* q, int q_ld,
                                       bool q_by_sequence, const void* kv, int kv_ld, void* out) {
  RETURN_IF_ERROR(cuda::FirstQueryAttention(
      p_,
      {q, q_ld, q_by_sequence, kv, kv_ld, ints_.cu, n_, shape_.max_len, h_, config_.num_heads, out,
       prefetch_for ? PrefetchFor(*prefetch_for) : PrefetchRanges{}},
      kernels_));
  return Stamp("attention", 4.0 * n_ * shape_.max_len * h_);
}

// (Sequences of 4 tokens and more on average: the first tokens' rows, and
// their Q behind K | V, fit in ctx and qkv however many dummies are empty.)
bool EncoderOps::SplitQueryPays() const { return t_ >= kSplitQueryMinTokens && 4 * n_ <= t_; }

Status EncoderOps::GatedActivation(const void* in, int rows, void* out) {
  RETURN_IF_ERROR(cuda::GatedActivation(p_, config_.hidden_act, in, rows, config_.intermediate_size,
                                        out, kernels_));
  return Stamp("gated activation", 0);
}

Status EncoderOps::GatherFirstTokens(const void* in, void* out) {
  RETURN_IF_ERROR(cuda::GatherFirstTokens(p_, in, ints_.cu, n_, h_, out, kernels_));
  return Stamp("gather first tokens", 0);
}

Status EncoderOps::PoolSequences(const void* x, Pooling pooling, float* out, int out_stride) {
  return cuda::PoolSequences(p_, x, ints_.cu, ints_.pool_start, n_, h_, pooling, out, out_stride,
                             kernels_);
}

Status EncoderOps::ConvertToFloat(const void* in, float* out, size_t count) {
  return cuda::ConvertToFloat(p_, in, out, count, kernels_);
}

Status EncoderOps::ConvertFromFloat(const float* in, void* out, size_t count) {
  return cuda::ConvertFromFloat(p_, in, out, count, kernels_);
}

Status EncoderOps::ActivateToFloat(const void* in, float* out, size_t count,
                                   bertrt::DenseActivation act) {
  return cuda::ActivateToFloat(p_, in, out, count, act, kernels_);
}

Status EncoderOps::LayerNormFloat(float* x, int rows, ops::Norm norm) {
  return cuda::LayerNorm(Precision::kFp32, x, x, rows, h_, norm.gamma, norm.beta,
                         config_.layer_norm_eps, kernels_);
}

Status EncoderOps::SmallLinear(const DeviceSmallLinear& w, const void* x, int rows, float* y) {
  return cuda::SmallLinear(p_, x, rows, w.in, w.w, w.b, w.out, y, kernels_);
}

Status EncoderOps::SmallLinearFloat(const DeviceSmallLinear& w, const float* x, int rows,
                                    float* y) {
  return cuda::SmallLinear(Precision::kFp32, x, rows, w.in, w.w, w.b, w.out, y, kernels_);
}

Status EncoderOps::DenseActivation(float* x, size_t count, bertrt::DenseActivation act) {
  return ApplyDenseActivation(x, count, act, kernels_);
}

Status EncoderOps::L2Normalize(float* x, int rows, int width) {
  return L2NormalizeRows(x, rows, width, kernels_);
}

Status EncoderOps::ZeroFloat(float* x, size_t count) {
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x, 0, count * sizeof(float), stream_));
  return Status::Ok();
}

Status EncoderOps::SpladePool(const void* logits, int first_token, int rows, float* out) {
  return cuda::SpladePool(p_, logits, first_token, rows, ints_.cu, n_, config_.vocab_size,
                          config_.splade_sum, config_.splade_log1p_twice, out, kernels_);
}

Status EncoderForward::Run(const Shape& shape, const Workspace& ws, cudaStream_t stream,
                           OpTrace* trace) const {
  const AttentionArgs attention = AttentionArgsFor(shape, ws);
  EncoderOps ops(ops_context_, shape, ws, attention, stream, trace);
  const ops::Batch batch{
      .tokens = shape.tokens,
      .seqs = shape.seqs,
      .max_len = shape.max_len,
      .hidden_state = shape.hidden_state,
      .first_tokens_only = OutputsReadOnlyFirstTokens(outputs_, shape.hidden_state),
      .normalize = shape.normalize};
  return model::EncoderForward<EncoderOps>(config_, weights_.forward, ops, batch).Run();
}

AttentionArgs EncoderForward::AttentionArgsFor(const Shape& shape, const Workspace& ws) const {
  const BatchInts ints = LayOutInts(ws.ints, shape);
  AttentionArgs a{ws.qkv,        ints.by_length,      shape.seqs,
                  shape.max_len, config_.hidden_size, config_.num_heads,
                  ws.ctx,        compute_capability_, sm_count_};
  a.tokens = shape.tokens;
  a.allow_tma = ops_context_.tuning.tma_attention;
  a.position_bias = weights_.relative_bias;
  a.bias_span = config_.max_positions();
  // Packed windows bound each row's keys by its sequence alone, which a
  // local window would also have to.
  if (ops_context_.tuning.attention_windows && config_.local_window == 0 &&
      AttentionTakesWindows(ops_context_.options.precision, a))
    a.row_bounds = ints.row_bounds;
  return a;
}

const float* EncoderForward::DeviceArray(const Workspace& ws, HeadArray array) const {
  return model::HeadArrayIn(config_, BuffersOf(ws), array);
}

}  // namespace bertrt::cuda

#include "backends/cpu/cpu_encoder_ops.h"

#include <algorithm>

namespace bertrt::cpu {
namespace {

Epilogue EpilogueFor(HiddenAct act) {
  switch (act) {
    case HiddenAct::kGelu:
      return Epilogue::kGelu;
    case HiddenAct::kGeluTanh:
      return Epilogue::kGeluTanh;
    case HiddenAct::kRelu:
      return Epilogue::kRelu;
  }
  return Epilogue::kNone;
}

Act ActFor(DenseActivation act) {
  switch (act) {
    case DenseActivation::kIdentity:
      return Act::kNone;
    case DenseActivation::kTanh:
      return Act::kTanh;
    case DenseActivation::kRelu:
      return Act::kRelu;
    case DenseActivation::kGelu:
      return Act::kGelu;
    case DenseActivation::kSigmoid:
      return Act::kSigmoid;
  }
  return Act::kNone;
}

}  // namespace

void Workspace::Reserve(const ModelConfig& c, const RaggedBatch& batch, int labels, int threads,
                        int masked_lm_chunk) {
  const size_t t = batch.num_tokens(), n = batch.num_seqs(), h = c.hidden_size;
  const size_t inter = c.intermediate_size;
  const bool splade = c.head == HeadKind::kSparseEmbedding;
  // The widest row a sentence embedding's pooled/dense rows take.
  size_t pooled_width = std::max<size_t>(h, c.pooled_width());
  for (const DenseSpec& d : c.dense) pooled_width = std::max<size_t>(pooled_width, d.out_features);
  const size_t sizes[] = {
      t * h,                              // x (and hidden: fp32 already)
      t * 3 * h,                          // qkv
      t * h,                              // ctx
      t * h,                              // tmp
      t * inter * (c.gated_ffn ? 2 : 1),  // inter
      c.gated_ffn ? t * inter : 0,        // gated
      splade ? std::min<size_t>(t, masked_lm_chunk) * c.vocab_size : 0,  // mlm_logits
      n * pooled_width,                                                  // pooled
      c.dense.empty() ? 0 : n * pooled_width,                            // dense
      t * labels,                                                        // logits
      splade ? n * c.vocab_size : 0,                                     // sparse
      AttentionScratchFloats(batch.max_len, threads),                    // scratch
  };
  // 16-float (64-byte) alignment for each buffer.
  size_t total = 0;
  for (size_t s : sizes) total += (s + 15) / 16 * 16;
  if (storage_.size() < total) {
    storage_.clear();
    storage_.shrink_to_fit();
    storage_.resize(total);
  }
  float* p[std::size(sizes)];
  float* next = storage_.data();
  for (size_t i = 0; i < std::size(sizes); ++i) {
    p[i] = next;
    next += (sizes[i] + 15) / 16 * 16;
  }
  buffers_ = {.x = p[0],
              .qkv = p[1],
              .ctx = p[2],
              .tmp = p[3],
              .inter = p[4],
              .gated = p[5],
              .mlm_logits = p[6],
              .pooled = p[7],
              .dense = p[8],
              .logits = p[9],
              .hidden = p[0],
              .sparse = p[10]};
  scratch_ = p[11];
}

Status EncoderOps::EmbedLayerNorm(float* out) {
  cpu::EmbedLayerNorm(batch_.input_ids.data(),
                      c_.takes_token_types ? batch_.token_type_ids.data() : nullptr, cu(), seqs(),
                      tables_.embeddings, c_.hidden_size, c_.layer_norm_eps, out, threads_);
  return Status::Ok();
}

Status EncoderOps::LayerNorm(const float* in, float* out, int rows, ops::Norm norm,
                             const LinearWeights* /*feeds*/) {
  cpu::LayerNorm(in, out, rows, c_.hidden_size, norm.gamma, norm.beta, c_.layer_norm_eps, threads_);
  return Status::Ok();
}

Status EncoderOps::Linear(const char* /*name*/, const cpu::Linear& w, const float* x, int rows,
                          float* y, ops::Tail<const float*, LinearWeights> tail) {
  const Epilogue e = tail.residual ? Epilogue::kResidual
                     : tail.act    ? EpilogueFor(*tail.act)
                                   : Epilogue::kNone;
  return w.Run(x, rows, y, matmul_, threads_, e, tail.residual);
}

Status EncoderOps::Rotary(float* qkv, bool local) {
  const std::vector<float>& table =
      local && !tables_.rotary.local.empty() ? tables_.rotary.local : tables_.rotary.global;
  cpu::ApplyRotary(qkv, cu(), seqs(), c_.hidden_size, c_.num_heads, table.data(), threads_);
  return Status::Ok();
}

Status EncoderOps::Attention(const Layer& /*layer*/, int local_window, const float* qkv,
                             float* ctx) {
  const std::vector<float>& bias = tables_.relative_bias;
  cpu::Attention(qkv, cu(), seqs(), batch_.max_len, c_.hidden_size, c_.num_heads,
                 {bias.empty() ? nullptr : bias.data(), c_.max_positions()}, ctx, scratch_,
                 threads_, {local_window});
  return Status::Ok();
}

Status EncoderOps::GatedActivation(const float* in, int rows, float* out) {
  cpu::GatedGelu(in, rows, c_.intermediate_size, c_.hidden_act == HiddenAct::kGeluTanh, out,
                 threads_);
  return Status::Ok();
}

Status EncoderOps::GatherFirstTokens(const float* in, float* out) {
  cpu::GatherFirstTokens(in, cu(), seqs(), c_.hidden_size, out);
  return Status::Ok();
}

Status EncoderOps::PoolSequences(const float* x, Pooling pooling, float* out, int out_stride) {
  cpu::PoolSequences(x, cu(), batch_.pool_start.empty() ? nullptr : batch_.pool_start.data(),
                     seqs(), c_.hidden_size, pooling, out, out_stride);
  return Status::Ok();
}

Status EncoderOps::ConvertToFloat(const float* in, float* out, size_t count) {
  if (in != out) std::copy(in, in + count, out);
  return Status::Ok();
}

Status EncoderOps::ConvertFromFloat(const float* in, float* out, size_t count) {
  return ConvertToFloat(in, out, count);
}

Status EncoderOps::ActivateToFloat(const float* in, float* out, size_t count,
                                   bertrt::DenseActivation act) {
  RETURN_IF_ERROR(ConvertToFloat(in, out, count));
  return DenseActivation(out, count, act);
}

Status EncoderOps::LayerNormFloat(float* x, int rows, ops::Norm norm) {
  return LayerNorm(x, x, rows, norm);
}

Status EncoderOps::SmallLinear(const cpu::Linear& w, const float* x, int rows, float* y) {
  return w.Run(x, rows, y, matmul_, threads_);
}

Status EncoderOps::SmallLinearFloat(const cpu::Linear& w, const float* x, int rows, float* y) {
  return w.Run(x, rows, y, matmul_, threads_);
}

Status EncoderOps::DenseActivation(float* x, size_t count, bertrt::DenseActivation act) {
  if (act != DenseActivation::kIdentity)
    BiasAct(x, 1, static_cast<int>(count), nullptr, ActFor(act), threads_);
  return Status::Ok();
}

Status EncoderOps::L2Normalize(float* x, int rows, int width) {
  L2NormalizeRows(x, rows, width);
  return Status::Ok();
}

Status EncoderOps::ZeroFloat(float* x, size_t count) {
  std::fill(x, x + count, 0.0f);
  return Status::Ok();
}

Status EncoderOps::SpladePool(const float* logits, int first_token, int rows, float* out) {
  cpu::SpladePool(logits, first_token, rows, cu(), seqs(), c_.vocab_size, c_.splade_sum,
                  c_.splade_log1p_twice, out, threads_);
  return Status::Ok();
}

}  // namespace bertrt::cpu

// The fp32 CPU engine: packed weights prepared once, one workspace grown on
// demand, and a forward pass over the ragged batch with no padding anywhere.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/cpu_ops.h"
#include "bertrt/engine.h"
#include "runtime/model_check.h"
#include "runtime/outputs.h"
#include "runtime/relative_position.h"
#include "runtime/rotary.h"

namespace bertrt {
namespace {

using cpu::Epilogue;

struct CpuLayer {
  // Bias, FFN activation and both residual adds belong to the Linears (the
  // GEMM's epilogue, or with sgemm the one pass after it).
  cpu::Linear qkv, attn_out, ffn_in, ffn_out;
  const float* attn_gamma = nullptr;
  const float* attn_beta = nullptr;
  const float* ffn_gamma = nullptr;
  const float* ffn_beta = nullptr;
};

// Activation buffers for one batch, carved out of the workspace.
struct Buffers {
  float* x;        // [tokens, h] hidden state, updated in place
  float* qkv;      // [tokens, 3h]
  float* ctx;      // [tokens, h]
  float* inter;    // [tokens, intermediate] (2 x intermediate for a gated FFN)
  float* scratch;  // attention scores
  float* normed;   // [tokens, h]: pre_norm's LayerNorm(x); gated FFN's output
};

class CpuEngine final : public Engine {
 public:
  CpuEngine(std::shared_ptr<const Model> model, int threads)
      : model_(std::move(model)), outputs_(DescribeOutputs(*model_)), threads_(threads) {}

  Status Init();
  StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) override;
  const ModelConfig& config() const override { return model_->config; }
  std::string device() const override { return "cpu:" + std::to_string(threads_) + "t"; }
  size_t PeakMemoryBytes() const override { return peak_bytes_.load(); }

 private:
  Buffers Reserve(const RaggedBatch& batch);
  // With first_tokens_only (OutputsReadOnlyFirstTokens), the last layer
  // keeps each sequence's first row alone after its attention, in rows
  // 0..n-1 of x.
  Status Encoder(const RaggedBatch& batch, const Buffers& b, bool first_tokens_only);
  Status Heads(const RaggedBatch& batch, const RunOptions& options, bool first_tokens_only,
               const float* x, BatchOutputs* out);
  StatusOr<std::vector<float>> Dense(const float* a, int rows, cpu::Linear& w, cpu::Act act);
  // The pooler's dense + activation on `rows` rows, then the LayerNorm of a
  // prediction head (ModelConfig::prediction_head).
  StatusOr<std::vector<float>> PredictionHead(const float* a, int rows);
  // SPLADE: the masked-LM head on every token of x, pooled per sequence.
  StatusOr<std::vector<float>> Splade(const RaggedBatch& batch, const float* x);
  // Packs, concatenates and checks the weights, then reorders them for the GEMM.
  StatusOr<cpu::Linear> MakeLinear(const std::vector<const Tensor*>& weights,
                                   const std::vector<const Tensor*>& biases, int in,
                                   Epilogue epilogue, const char* name);

  std::shared_ptr<const Model> model_;
  const std::vector<OutputDescription> outputs_;  // what Heads returns
  int threads_;
  std::vector<CpuLayer> layers_;
  cpu::Linear pooler_, classifier_;
  cpu::Linear mlm_dense_, mlm_decoder_;  // SPLADE's masked-LM head
  std::vector<cpu::Linear> dense_;  // sentence-transformers Dense modules
  std::vector<Tensor> dense_zero_bias_;  // for Dense modules without a bias
  std::vector<float> relative_bias_;     // MPNet's (RelativePositionBiasTable); empty: none
  // ModernBERT's rotary tables (RotaryTable) of the global and the local
  // layers' thetas; empty: no rotary positions (the local one: the local
  // layers use the global one).
  std::vector<float> rotary_global_, rotary_local_;
  std::mutex mu_;  // Run shares the workspace and the matmul context
  cpu::MatmulContext matmul_;
  std::vector<float> ws_;
  std::vector<float> splade_transformed_, splade_logits_;  // Splade's chunk buffers
  std::atomic<size_t> peak_bytes_{0};  // readable while a Run holds mu_
  // peak_bytes_ = the buffers kept across runs, after one of them grew.
  void NotePeak() {
    peak_bytes_.store((ws_.size() + splade_transformed_.size() + splade_logits_.size()) *
                      sizeof(float));
  }
};

StatusOr<cpu::Linear> CpuEngine::MakeLinear(const std::vector<const Tensor*>& weights,
                                            const std::vector<const Tensor*>& biases, int in,
                                            Epilogue epilogue, const char* name) {
  ASSIGN_OR_RETURN(cpu::PackedLinear packed, cpu::PackLinear(weights, biases, in, name));
  return cpu::Linear::Create(std::move(packed), epilogue, &matmul_);
}

Epilogue EpilogueFor(HiddenAct act) {
  switch (act) {
    case HiddenAct::kGelu: return Epilogue::kGelu;
    case HiddenAct::kGeluTanh: return Epilogue::kGeluTanh;
    case HiddenAct::kRelu: return Epilogue::kRelu;
  }
  return Epilogue::kNone;
}

cpu::Act ActFor(DenseActivation act) {
  switch (act) {
    case DenseActivation::kIdentity: return cpu::Act::kNone;
    case DenseActivation::kTanh: return cpu::Act::kTanh;
    case DenseActivation::kRelu: return cpu::Act::kRelu;
    case DenseActivation::kGelu: return cpu::Act::kGelu;
    case DenseActivation::kSigmoid: return cpu::Act::kSigmoid;
  }
  return cpu::Act::kNone;
}

Status CpuEngine::Init() {
  RETURN_IF_ERROR(CheckModel(*model_));
  RETURN_IF_ERROR(matmul_.Init());
  const ModelConfig& c = model_->config;
  const int h = c.hidden_size;
  for (const LayerWeights& l : model_->weights.layers) {
    CpuLayer layer;
    ASSIGN_OR_RETURN(layer.qkv, MakeLinear({&l.query_w, &l.key_w, &l.value_w},
                                           {&l.query_b, &l.key_b, &l.value_b}, h,
                                           Epilogue::kNone, "qkv"));
    ASSIGN_OR_RETURN(layer.attn_out, MakeLinear({&l.attn_out_w}, {&l.attn_out_b}, h,
                                                Epilogue::kAccumulate, "attention output"));
    // A gated FFN's activation multiplies the halves: it runs after the GEMM.
    ASSIGN_OR_RETURN(layer.ffn_in, MakeLinear({&l.ffn_in_w}, {&l.ffn_in_b}, h,
                                              c.gated_ffn ? Epilogue::kNone
                                                          : EpilogueFor(c.hidden_act),
                                              "ffn in"));
    ASSIGN_OR_RETURN(layer.ffn_out, MakeLinear({&l.ffn_out_w}, {&l.ffn_out_b},
                                               c.intermediate_size, Epilogue::kAccumulate,
                                               "ffn out"));
    if (layer.qkv.out() != 3 * h || layer.attn_out.out() != h ||
        layer.ffn_in.out() != c.intermediate_size * (c.gated_ffn ? 2 : 1) ||
        layer.ffn_out.out() != h)
      return InvalidArgument("cpu engine: a layer's linear output sizes disagree with the config");
    layer.attn_gamma = l.attn_ln_gamma.f32();
    layer.attn_beta = l.attn_ln_beta.f32();
    layer.ffn_gamma = l.ffn_ln_gamma.f32();
    layer.ffn_beta = l.ffn_ln_beta.f32();
    layers_.push_back(std::move(layer));
  }
  const ModelWeights& w = model_->weights;
  if (HeadUsesPooler(*model_)) {
    ASSIGN_OR_RETURN(pooler_, MakeLinear({&w.pooler_w}, {&w.pooler_b}, h, Epilogue::kNone,
                                         "pooler"));
  }
  if (!w.classifier_w.empty() && c.head != HeadKind::kBase &&
      c.head != HeadKind::kSentenceEmbedding) {
    ASSIGN_OR_RETURN(classifier_, MakeLinear({&w.classifier_w}, {&w.classifier_b}, h,
                                             Epilogue::kNone, "classifier"));
  }
  if (c.head == HeadKind::kSparseEmbedding) {
    ASSIGN_OR_RETURN(mlm_dense_, MakeLinear({&w.mlm_dense_w}, {&w.mlm_dense_b}, h,
                                            EpilogueFor(c.mlm_activation), "masked-LM transform"));
    ASSIGN_OR_RETURN(mlm_decoder_, MakeLinear({&w.mlm_decoder()}, {&w.mlm_decoder_b}, h,
                                              Epilogue::kNone, "masked-LM decoder"));
  }
  relative_bias_ = RelativePositionBiasTable(c, w);
  if (c.rope_theta > 0.0f) {
    rotary_global_ = RotaryTable(c.rope_theta, c.head_dim(), c.max_positions());
    // The local layers' table only where they exist with a theta of their own.
    if (c.local_window > 0 && c.local_rope_theta != c.rope_theta)
      rotary_local_ = RotaryTable(c.local_rope_theta, c.head_dim(), c.max_positions());
  }
  dense_zero_bias_.reserve(w.dense.size());  // no reallocation: dense_ points into it
  for (size_t i = 0; i < w.dense.size(); ++i) {
    const DenseSpec& d = c.dense[i];
    const Tensor* bias = &w.dense[i].b;
    if (bias->empty()) bias = &dense_zero_bias_.emplace_back(Tensor::ZerosF32({d.out_features}));
    ASSIGN_OR_RETURN(cpu::Linear dense, MakeLinear({&w.dense[i].w}, {bias}, d.in_features,
                                                   Epilogue::kNone, "Dense module"));
    dense_.push_back(std::move(dense));
  }
  return Status::Ok();
}

Buffers CpuEngine::Reserve(const RaggedBatch& batch) {
  const ModelConfig& c = model_->config;
  const size_t t = batch.num_tokens(), h = c.hidden_size;
  const size_t inter = static_cast<size_t>(c.intermediate_size) * (c.gated_ffn ? 2 : 1);
  const size_t sizes[] = {t * h, t * 3 * h, t * h, t * inter,
                          cpu::AttentionScratchFloats(batch.max_len, threads_),
                          c.pre_norm || c.gated_ffn ? t * std::max<size_t>(h, c.intermediate_size)
                                                    : 0};
  size_t total = 0;
  // 16-float (64-byte) alignment for each buffer.
  for (size_t s : sizes) total += (s + 15) / 16 * 16;
  if (ws_.size() < total) {
    ws_.clear();
    ws_.shrink_to_fit();
    ws_.resize(total);
    NotePeak();
  }
  float* p[6];
  float* next = ws_.data();
  for (int i = 0; i < 6; ++i) {
    p[i] = next;
    next += (sizes[i] + 15) / 16 * 16;
  }
  return {p[0], p[1], p[2], p[3], p[4], p[5]};
}

Status CpuEngine::Encoder(const RaggedBatch& batch, const Buffers& b, bool first_tokens_only) {
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  const int t = batch.num_tokens(), h = c.hidden_size, n = batch.num_seqs();
  const int32_t* cu = batch.cu_seqlens.data();
  // Token i reads position row position_offset + i (RoBERTa-family); rotary
  // models have no table.
  const float* positions = w.position_embeddings.empty()
                               ? nullptr
                               : w.position_embeddings.f32() + size_t(c.position_offset) * h;
  const cpu::EmbeddingTables tables{w.word_embeddings.f32(), positions,
                                    w.token_type_embeddings.f32(), w.emb_ln_gamma.f32(),
                                    w.emb_ln_beta.f32()};
  cpu::EmbedLayerNorm(batch.input_ids.data(),
                      c.takes_token_types ? batch.token_type_ids.data() : nullptr, cu, n, tables,
                      h, c.layer_norm_eps, b.x, threads_);
  // LayerNorm of `rows` rows of x: in place (post-norm), or into normed,
  // leaving x as the residual stream (pre-norm). Returns what the next
  // linear reads.
  auto norm = [&](int rows, const float* gamma, const float* beta) -> const float* {
    float* out = b.x;
    if (c.pre_norm) {
      out = b.normed;
      std::copy(b.x, b.x + size_t(rows) * h, out);
    }
    cpu::BiasLayerNorm(out, rows, h, nullptr, gamma, beta, c.layer_norm_eps, threads_);
    return out;
  };
  for (size_t i = 0; i < layers_.size(); ++i) {
    CpuLayer& l = layers_[i];
    const bool local = c.local_layer(static_cast<int>(i));
    // Pre-norm: the layer reads LayerNorm(x) (the first layer x itself).
    const float* in = c.pre_norm && l.attn_gamma ? norm(t, l.attn_gamma, l.attn_beta) : b.x;
    RETURN_IF_ERROR(l.qkv.Run(in, t, b.qkv, &matmul_, threads_));
    if (c.rope_theta > 0.0f) {
      const std::vector<float>& table =
          local && !rotary_local_.empty() ? rotary_local_ : rotary_global_;
      cpu::ApplyRotary(b.qkv, cu, n, h, c.num_heads, table.data(), threads_);
    }
    cpu::Attention(b.qkv, cu, n, batch.max_len, h, c.num_heads,
                   {relative_bias_.empty() ? nullptr : relative_bias_.data(), c.max_positions()},
                   b.ctx, b.scratch, threads_, {local ? c.local_window : 0});
    int rows = t;
    if (first_tokens_only && i + 1 == layers_.size()) {
      // The rest of the last layer on first rows only: 3/4 of its GEMM work.
      cpu::GatherFirstTokens(b.ctx, cu, n, h, b.ctx);
      cpu::GatherFirstTokens(b.x, cu, n, h, b.x);
      rows = n;
    }
    // The Linear adds bias and residual (x += ctx W^T + b); LayerNorm only normalizes.
    RETURN_IF_ERROR(l.attn_out.Run(b.ctx, rows, b.x, &matmul_, threads_));
    if (!c.pre_norm) norm(rows, l.attn_gamma, l.attn_beta);
    in = c.pre_norm ? norm(rows, l.ffn_gamma, l.ffn_beta) : b.x;
    RETURN_IF_ERROR(l.ffn_in.Run(in, rows, b.inter, &matmul_, threads_));
    const float* activated = b.inter;
    if (c.gated_ffn) {
      // normed is free again: the FFN input GEMM has read it.
      cpu::GatedGelu(b.inter, rows, c.intermediate_size, c.hidden_act == HiddenAct::kGeluTanh,
                     b.normed, threads_);
      activated = b.normed;
    }
    RETURN_IF_ERROR(l.ffn_out.Run(activated, rows, b.x, &matmul_, threads_));
    if (!c.pre_norm) norm(rows, l.ffn_gamma, l.ffn_beta);
  }
  if (c.pre_norm) {
    const int rows = first_tokens_only ? n : t;
    cpu::BiasLayerNorm(b.x, rows, h, nullptr, w.final_ln_gamma.f32(), w.final_ln_beta.f32(),
                       c.layer_norm_eps, threads_);
  }
  return Status::Ok();
}

StatusOr<std::vector<float>> CpuEngine::Dense(const float* a, int rows, cpu::Linear& w,
                                              cpu::Act act) {
  std::vector<float> out(static_cast<size_t>(rows) * w.out());
  RETURN_IF_ERROR(w.Run(a, rows, out.data(), &matmul_, threads_));
  // The pooler's activation: our own, a few rows, held to the same accuracy as GELU.
  if (act != cpu::Act::kNone) cpu::BiasAct(out.data(), rows, w.out(), nullptr, act, threads_);
  return out;
}

StatusOr<std::vector<float>> CpuEngine::PredictionHead(const float* a, int rows) {
  const ModelConfig& c = model_->config;
  ASSIGN_OR_RETURN(std::vector<float> out, Dense(a, rows, pooler_, ActFor(c.pooler_activation)));
  if (c.prediction_head)
    cpu::BiasLayerNorm(out.data(), rows, c.hidden_size, nullptr,
                       model_->weights.pooler_ln_gamma.f32(), model_->weights.pooler_ln_beta.f32(),
                       c.layer_norm_eps, threads_);
  return out;
}

StatusOr<std::vector<float>> CpuEngine::Splade(const RaggedBatch& batch, const float* x) {
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  const int t = batch.num_tokens(), h = c.hidden_size, vocab = c.vocab_size;
  // Tokens go through the head in chunks so that their [rows, vocab] logits
  // stay small (30,522 columns for BERT's vocabulary: 31 MB a chunk).
  constexpr int kChunk = 256;
  std::vector<float> pooled(static_cast<size_t>(batch.num_seqs()) * vocab, 0.0f);
  // Kept across runs (31 MB of logits a chunk at BERT's vocabulary): Run
  // holds mu_.
  std::vector<float>& transformed = splade_transformed_;
  std::vector<float>& logits = splade_logits_;
  const size_t chunk_rows = std::min(t, kChunk);
  if (logits.size() < chunk_rows * vocab) {
    transformed.resize(chunk_rows * h);
    logits.resize(chunk_rows * vocab);
    NotePeak();
  }
  for (int first = 0; first < t; first += kChunk) {
    const int rows = std::min(kChunk, t - first);
    RETURN_IF_ERROR(mlm_dense_.Run(x + static_cast<size_t>(first) * h, rows, transformed.data(),
                                   &matmul_, threads_));
    cpu::BiasLayerNorm(transformed.data(), rows, h, nullptr, w.mlm_ln_gamma.f32(),
                       w.mlm_ln_beta.f32(), c.layer_norm_eps, threads_);
    RETURN_IF_ERROR(mlm_decoder_.Run(transformed.data(), rows, logits.data(), &matmul_, threads_));
    cpu::SpladePool(logits.data(), first, rows, batch.cu_seqlens.data(), batch.num_seqs(), vocab,
                    c.splade_sum, c.splade_log1p_twice, pooled.data(), threads_);
  }
  return pooled;
}

Status CpuEngine::Heads(const RaggedBatch& batch, const RunOptions& options,
                        bool first_tokens_only, const float* x, BatchOutputs* out) {
  const ModelConfig& c = model_->config;
  const int t = batch.num_tokens(), h = c.hidden_size, n = batch.num_seqs();
  const int32_t* cu = batch.cu_seqlens.data();
  std::vector<float> pooled;
  const bool pools = c.head == HeadKind::kSequenceClassification || c.head == HeadKind::kBase;
  if (!pooler_.empty() && pools) {
    // The first tokens (rows 0..n-1 of x already when the encoder kept only
    // those), or each sequence's mean (ModernBERT's classifier_pooling).
    std::vector<float> cls;
    const float* first = x;
    if (!first_tokens_only) {
      cls.resize(static_cast<size_t>(n) * h);
      if (c.classifier_mean_pooling)
        cpu::PoolSequences(x, cu, nullptr, n, h, Pooling::kMean, cls.data(), h);
      else
        cpu::GatherFirstTokens(x, cu, n, h, cls.data());
      first = cls.data();
    }
    ASSIGN_OR_RETURN(pooled, PredictionHead(first, n));
  }
  // The arrays the head's outputs are read from (DescribeOutputs).
  HostArrays arrays;
  std::vector<float> logits, emb, sparse;
  switch (c.head) {
    case HeadKind::kBase:
      break;
    case HeadKind::kSequenceClassification: {
      ASSIGN_OR_RETURN(logits, Dense(pooled.data(), n, classifier_, cpu::Act::kNone));
      break;
    }
    case HeadKind::kTokenClassification:
    case HeadKind::kQuestionAnswering: {
      // ModernBERT's prediction head on every token first.
      std::vector<float> transformed;
      if (c.prediction_head) {
        ASSIGN_OR_RETURN(transformed, PredictionHead(x, t));
      }
      ASSIGN_OR_RETURN(logits, Dense(c.prediction_head ? transformed.data() : x, t, classifier_,
                                     cpu::Act::kNone));
      break;
    }
    case HeadKind::kSentenceEmbedding: {
      int width = c.pooled_width();
      emb.resize(static_cast<size_t>(n) * width);
      if (first_tokens_only) {  // CLS pooling alone, of the rows the encoder kept
        std::copy(x, x + emb.size(), emb.begin());
      } else {
        for (size_t k = 0; k < c.pooling_modes.size(); ++k)
          cpu::PoolSequences(x, cu, batch.pool_start.data(), n, h, c.pooling_modes[k],
                             emb.data() + k * h, width);
      }
      for (size_t i = 0; i < dense_.size(); ++i) {
        ASSIGN_OR_RETURN(emb, Dense(emb.data(), n, dense_[i], ActFor(c.dense[i].activation)));
        width = dense_[i].out();
      }
      if (c.normalize) cpu::L2NormalizeRows(emb.data(), n, width);
      arrays[HeadArray::kSentenceEmbedding] = {emb.data(), width};
      break;
    }
    case HeadKind::kSparseEmbedding: {
      ASSIGN_OR_RETURN(sparse, Splade(batch, x));
      arrays[HeadArray::kSparseEmbedding] = {sparse.data(), c.vocab_size};
      break;
    }
  }
  if (!pooled.empty()) arrays[HeadArray::kPooler] = {pooled.data(), h};
  if (!logits.empty()) arrays[HeadArray::kClassifier] = {logits.data(), classifier_.out()};
  // All t rows when asked for: the encoder then kept every token.
  arrays[HeadArray::kHiddenState] = {x, h};
  ASSIGN_OR_RETURN(*out, AssembleOutputs(outputs_, options.last_hidden_state, arrays, t, n));
  return Status::Ok();
}

StatusOr<BatchOutputs> CpuEngine::Run(const RaggedBatch& batch, const RunOptions& options) {
  RETURN_IF_ERROR(ValidateBatch(batch, model_->config));
  std::lock_guard<std::mutex> lock(mu_);
  BatchOutputs out;
  if (batch.num_seqs() == 0) return out;
  const Buffers b = Reserve(batch);
  // oneDNN threads each GEMM over omp_get_max_threads() of the calling
  // thread: set it for this run and give the caller's setting back.
  const int caller_threads = omp_get_max_threads();
  omp_set_num_threads(threads_);
  const bool first_tokens_only = OutputsReadOnlyFirstTokens(outputs_, options.last_hidden_state);
  Status status = Encoder(batch, b, first_tokens_only);
  if (status.ok()) status = Heads(batch, options, first_tokens_only, b.x, &out);
  omp_set_num_threads(caller_threads);
  RETURN_IF_ERROR(status);
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(std::shared_ptr<const Model> model,
                                                  const CpuEngineOptions& options) {
  if (!model) return InvalidArgument("cpu engine: no model");
  if (options.threads < 0)
    return InvalidArgument("cpu engine: threads must be >= 0 (0: all cores)");
  const int threads = options.threads > 0 ? options.threads : omp_get_num_procs();
  // The CPU engine computes in fp32; an fp16/bf16 plan is widened here, once.
  std::shared_ptr<const Model> widened = WithFloat32Weights(model);
  if (widened != model && options.on_notice)
    options.on_notice(model->source +
                      ": fp16/bf16 weights widened to fp32 for the CPU engine, which computes in "
                      "fp32");
  auto engine = std::make_unique<CpuEngine>(std::move(widened), threads);
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace bertrt

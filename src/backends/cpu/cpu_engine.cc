// The fp32 CPU engine: packed weights prepared once, one workspace grown on
// demand, and a forward pass over the ragged batch with no padding anywhere.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "bertrt/engine.h"
#include "runtime/model_check.h"
#include "runtime/outputs.h"

namespace bertrt {
namespace {

using cpu::PackedLinear;

struct CpuLayer {
  PackedLinear qkv, attn_out, ffn_in, ffn_out;
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
  float* inter;    // [tokens, intermediate]
  float* scratch;  // attention scores
};

class CpuEngine final : public Engine {
 public:
  CpuEngine(std::shared_ptr<const Model> model, int threads)
      : model_(std::move(model)), threads_(threads) {}

  Status Init();
  StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) override;
  const ModelConfig& config() const override { return model_->config; }
  std::string device() const override { return "cpu:" + std::to_string(threads_) + "t"; }
  size_t PeakMemoryBytes() const override { return peak_bytes_.load(); }

 private:
  Buffers Reserve(const RaggedBatch& batch);
  void Encoder(const RaggedBatch& batch, const Buffers& b);
  void Heads(const RaggedBatch& batch, const RunOptions& options, const float* x,
             BatchOutputs* out);
  std::vector<float> Dense(const float* a, int rows, const PackedLinear& w, cpu::Act act);

  std::shared_ptr<const Model> model_;
  int threads_;
  std::vector<CpuLayer> layers_;
  PackedLinear pooler_, classifier_;
  std::mutex mu_;  // Run shares the workspace
  std::vector<float> ws_;
  std::atomic<size_t> peak_bytes_{0};  // readable while a Run holds mu_
};

Status CpuEngine::Init() {
  RETURN_IF_ERROR(CheckModel(*model_));
  const ModelConfig& c = model_->config;
  const int h = c.hidden_size;
  for (const LayerWeights& l : model_->weights.layers) {
    CpuLayer layer;
    ASSIGN_OR_RETURN(layer.qkv, cpu::PackLinear({&l.query_w, &l.key_w, &l.value_w},
                                                {&l.query_b, &l.key_b, &l.value_b}, h, "qkv"));
    ASSIGN_OR_RETURN(layer.attn_out,
                     cpu::PackLinear({&l.attn_out_w}, {&l.attn_out_b}, h, "attention output"));
    ASSIGN_OR_RETURN(layer.ffn_in, cpu::PackLinear({&l.ffn_in_w}, {&l.ffn_in_b}, h, "ffn in"));
    ASSIGN_OR_RETURN(layer.ffn_out, cpu::PackLinear({&l.ffn_out_w}, {&l.ffn_out_b},
                                                    c.intermediate_size, "ffn out"));
    if (layer.qkv.out != 3 * h || layer.attn_out.out != h ||
        layer.ffn_in.out != c.intermediate_size || layer.ffn_out.out != h)
      return InvalidArgument("cpu engine: a layer's linear output sizes disagree with the config");
    layer.attn_gamma = l.attn_ln_gamma.f32();
    layer.attn_beta = l.attn_ln_beta.f32();
    layer.ffn_gamma = l.ffn_ln_gamma.f32();
    layer.ffn_beta = l.ffn_ln_beta.f32();
    layers_.push_back(std::move(layer));
  }
  const ModelWeights& w = model_->weights;
  if (HeadUsesPooler(*model_)) {
    ASSIGN_OR_RETURN(pooler_, cpu::PackLinear({&w.pooler_w}, {&w.pooler_b}, h, "pooler"));
  }
  if (!w.classifier_w.empty() && c.head != HeadKind::kBase &&
      c.head != HeadKind::kSentenceEmbedding) {
    ASSIGN_OR_RETURN(classifier_,
                     cpu::PackLinear({&w.classifier_w}, {&w.classifier_b}, h, "classifier"));
  }
  return Status::Ok();
}

Buffers CpuEngine::Reserve(const RaggedBatch& batch) {
  const ModelConfig& c = model_->config;
  const size_t t = batch.num_tokens(), h = c.hidden_size;
  const size_t sizes[] = {t * h, t * 3 * h, t * h, t * c.intermediate_size,
                          cpu::AttentionScratchFloats(batch.max_len, threads_)};
  size_t total = 0;
  // 16-float (64-byte) alignment for each buffer.
  for (size_t s : sizes) total += (s + 15) / 16 * 16;
  if (ws_.size() < total) {
    ws_.clear();
    ws_.shrink_to_fit();
    ws_.resize(total);
    peak_bytes_.store(total * sizeof(float));
  }
  float* p[5];
  float* next = ws_.data();
  for (int i = 0; i < 5; ++i) {
    p[i] = next;
    next += (sizes[i] + 15) / 16 * 16;
  }
  return {p[0], p[1], p[2], p[3], p[4]};
}

void CpuEngine::Encoder(const RaggedBatch& batch, const Buffers& b) {
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  const int t = batch.num_tokens(), h = c.hidden_size, n = batch.num_seqs();
  const int32_t* cu = batch.cu_seqlens.data();
  const cpu::EmbeddingTables tables{w.word_embeddings.f32(), w.position_embeddings.f32(),
                                    w.token_type_embeddings.f32(), w.emb_ln_gamma.f32(),
                                    w.emb_ln_beta.f32()};
  cpu::EmbedLayerNorm(batch.input_ids.data(), batch.token_type_ids.data(), cu, n, tables, h,
                      c.layer_norm_eps, b.x, threads_);
  const cpu::Act act = cpu::ActFor(c.hidden_act);
  for (const CpuLayer& l : layers_) {
    cpu::Linear(b.x, t, l.qkv, b.qkv, false, threads_);
    cpu::BiasAct(b.qkv, t, 3 * h, l.qkv.b, cpu::Act::kNone, threads_);
    cpu::Attention(b.qkv, cu, n, batch.max_len, h, c.num_heads, b.ctx, b.scratch, threads_);
    // The residual is accumulated by the GEMM itself (x += ctx W^T), so the
    // LayerNorm pass only adds the bias.
    cpu::Linear(b.ctx, t, l.attn_out, b.x, true, threads_);
    cpu::BiasLayerNorm(b.x, t, h, l.attn_out.b, l.attn_gamma, l.attn_beta, c.layer_norm_eps,
                       threads_);
    cpu::Linear(b.x, t, l.ffn_in, b.inter, false, threads_);
    cpu::BiasAct(b.inter, t, c.intermediate_size, l.ffn_in.b, act, threads_);
    cpu::Linear(b.inter, t, l.ffn_out, b.x, true, threads_);
    cpu::BiasLayerNorm(b.x, t, h, l.ffn_out.b, l.ffn_gamma, l.ffn_beta, c.layer_norm_eps,
                       threads_);
  }
}

std::vector<float> CpuEngine::Dense(const float* a, int rows, const PackedLinear& w,
                                    cpu::Act act) {
  std::vector<float> out(static_cast<size_t>(rows) * w.out);
  cpu::Linear(a, rows, w, out.data(), false, threads_);
  cpu::BiasAct(out.data(), rows, w.out, w.b, act, threads_);
  return out;
}

void CpuEngine::Heads(const RaggedBatch& batch, const RunOptions& options, const float* x,
                      BatchOutputs* out) {
  const ModelConfig& c = model_->config;
  const int t = batch.num_tokens(), h = c.hidden_size, n = batch.num_seqs();
  const int32_t* cu = batch.cu_seqlens.data();
  std::vector<float> pooled;
  if (pooler_.w) {
    std::vector<float> cls(static_cast<size_t>(n) * h);
    cpu::GatherFirstTokens(x, cu, n, h, cls.data());
    pooled = Dense(cls.data(), n, pooler_, cpu::Act::kTanh);
  }
  switch (c.head) {
    case HeadKind::kBase:
      if (pooler_.w) out->outputs.push_back(MakeOutput("pooler_output", false, h, pooled.data(), n));
      break;
    case HeadKind::kSequenceClassification: {
      std::vector<float> logits = Dense(pooled.data(), n, classifier_, cpu::Act::kNone);
      out->outputs.push_back(MakeOutput("logits", false, classifier_.out, logits.data(), n));
      break;
    }
    case HeadKind::kTokenClassification: {
      std::vector<float> logits = Dense(x, t, classifier_, cpu::Act::kNone);
      out->outputs.push_back(MakeOutput("logits", true, classifier_.out, logits.data(), t));
      break;
    }
    case HeadKind::kQuestionAnswering: {
      std::vector<float> logits = Dense(x, t, classifier_, cpu::Act::kNone);
      AppendQuestionAnsweringOutputs(logits.data(), t, out);
      break;
    }
    case HeadKind::kSentenceEmbedding: {
      std::vector<float> emb(static_cast<size_t>(n) * h);
      cpu::PoolSequences(x, cu, n, h, c.pooling, emb.data());
      if (c.normalize) cpu::L2NormalizeRows(emb.data(), n, h);
      out->outputs.push_back(MakeOutput("embedding", false, h, emb.data(), n));
      break;
    }
  }
  if (options.last_hidden_state)
    out->outputs.push_back(MakeOutput("last_hidden_state", true, h, x, t));
}

StatusOr<BatchOutputs> CpuEngine::Run(const RaggedBatch& batch, const RunOptions& options) {
  RETURN_IF_ERROR(ValidateBatch(batch, model_->config));
  std::lock_guard<std::mutex> lock(mu_);
  BatchOutputs out;
  if (batch.num_seqs() == 0) return out;
  const Buffers b = Reserve(batch);
  Encoder(batch, b);
  Heads(batch, options, b.x, &out);
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(std::shared_ptr<const Model> model,
                                                  const CpuEngineOptions& options) {
  if (!model) return InvalidArgument("cpu engine: no model");
  if (options.threads < 0)
    return InvalidArgument("cpu engine: threads must be >= 0 (0: all cores)");
  const int threads = options.threads > 0 ? options.threads : omp_get_num_procs();
  auto engine = std::make_unique<CpuEngine>(std::move(model), threads);
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace bertrt

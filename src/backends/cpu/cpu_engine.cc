// The fp32 CPU engine: packed weights prepared once, one workspace grown on
// demand, and the one forward (model/encoder_forward.h) on the CPU's ops over
// the ragged batch, with no padding anywhere.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_encoder_ops.h"
#include "bertrt/engine.h"
#include "bertrt/head_outputs.h"
#include "model/encoder_forward.h"
#include "model/model_check.h"
#include "model/outputs.h"
#include "model/relative_position.h"
#include "model/rotary.h"

namespace bertrt {
namespace {

using cpu::EncoderOps;

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
  // Packs, concatenates and checks the weights, then reorders them for the GEMM.
  StatusOr<cpu::Linear> MakeLinear(const std::vector<const Tensor*>& weights,
                                   const std::vector<const Tensor*>& biases, int in,
                                   const char* name);

  std::shared_ptr<const Model> model_;
  const std::vector<OutputDescription> outputs_;  // what Run returns
  int threads_;
  std::vector<cpu::Layer> layers_;
  cpu::Linear pooler_, classifier_;
  cpu::Linear mlm_dense_, mlm_decoder_;  // SPLADE's masked-LM head
  std::vector<cpu::Linear> dense_;  // sentence-transformers Dense modules
  std::vector<Tensor> dense_zero_bias_;  // for Dense modules without a bias
  cpu::ModelTables tables_;
  model::Weights<EncoderOps> weights_;  // the forward's view of the above
  std::mutex mu_;  // Run shares the workspace and the matmul context
  cpu::MatmulContext matmul_;
  cpu::Workspace workspace_;
  std::atomic<size_t> peak_bytes_{0};  // readable while a Run holds mu_
};

StatusOr<cpu::Linear> CpuEngine::MakeLinear(const std::vector<const Tensor*>& weights,
                                            const std::vector<const Tensor*>& biases, int in,
                                            const char* name) {
  ASSIGN_OR_RETURN(cpu::PackedLinear packed, cpu::PackLinear(weights, biases, in, name));
  return cpu::Linear::Create(std::move(packed), &matmul_);
}

ops::Norm NormOf(const Tensor& gamma, const Tensor& beta) {
  return gamma.empty() ? ops::Norm{} : ops::Norm{gamma.f32(), beta.f32()};
}

Status CpuEngine::Init() {
  RETURN_IF_ERROR(CheckModel(*model_));
  RETURN_IF_ERROR(matmul_.Init());
  const ModelConfig& c = model_->config;
  const int h = c.hidden_size;
  for (const LayerWeights& l : model_->weights.layers) {
    cpu::Layer layer;
    ASSIGN_OR_RETURN(layer.qkv, MakeLinear({&l.query_w, &l.key_w, &l.value_w},
                                           {&l.query_b, &l.key_b, &l.value_b}, h, "qkv"));
    ASSIGN_OR_RETURN(layer.attn_out,
                     MakeLinear({&l.attn_out_w}, {&l.attn_out_b}, h, "attention output"));
    ASSIGN_OR_RETURN(layer.ffn_in, MakeLinear({&l.ffn_in_w}, {&l.ffn_in_b}, h, "ffn in"));
    ASSIGN_OR_RETURN(layer.ffn_out,
                     MakeLinear({&l.ffn_out_w}, {&l.ffn_out_b}, c.intermediate_size, "ffn out"));
    if (layer.qkv.out() != 3 * h || layer.attn_out.out() != h ||
        layer.ffn_in.out() != c.intermediate_size * (c.gated_ffn ? 2 : 1) ||
        layer.ffn_out.out() != h)
      return InvalidArgument("cpu engine: a layer's linear output sizes disagree with the config");
    layer.attn_norm = NormOf(l.attn_ln_gamma, l.attn_ln_beta);
    layer.ffn_norm = NormOf(l.ffn_ln_gamma, l.ffn_ln_beta);
    layers_.push_back(std::move(layer));
  }
  const ModelWeights& w = model_->weights;
  weights_.layers = &layers_;
  weights_.final_norm = NormOf(w.final_ln_gamma, w.final_ln_beta);
  if (HeadUsesPooler(*model_)) {
    ASSIGN_OR_RETURN(pooler_, MakeLinear({&w.pooler_w}, {&w.pooler_b}, h, "pooler"));
    weights_.pooler = &pooler_;
    if (c.prediction_head) weights_.pooler_norm = NormOf(w.pooler_ln_gamma, w.pooler_ln_beta);
  }
  if (!w.classifier_w.empty() && c.head != HeadKind::kBase &&
      c.head != HeadKind::kSentenceEmbedding) {
    ASSIGN_OR_RETURN(classifier_,
                     MakeLinear({&w.classifier_w}, {&w.classifier_b}, h, "classifier"));
    weights_.classifier = &classifier_;
  }
  if (c.head == HeadKind::kSparseEmbedding) {
    ASSIGN_OR_RETURN(mlm_dense_,
                     MakeLinear({&w.mlm_dense_w}, {&w.mlm_dense_b}, h, "masked-LM transform"));
    ASSIGN_OR_RETURN(mlm_decoder_, MakeLinear({&w.mlm_decoder()}, {&w.mlm_decoder_b}, h,
                                              "masked-LM decoder"));
    weights_.mlm_dense = &mlm_dense_;
    weights_.mlm_decoder = &mlm_decoder_;
    weights_.mlm_norm = NormOf(w.mlm_ln_gamma, w.mlm_ln_beta);
  }
  // Token i reads position row position_offset + i (RoBERTa-family); rotary
  // models have no table.
  const float* positions = w.position_embeddings.empty()
                               ? nullptr
                               : w.position_embeddings.f32() + size_t(c.position_offset) * h;
  tables_.embeddings = {w.word_embeddings.f32(), positions, w.token_type_embeddings.f32(),
                        w.emb_ln_gamma.f32(), w.emb_ln_beta.f32()};
  tables_.relative_bias = RelativePositionBiasTable(c, w);
  if (c.rope_theta > 0.0f) {
    tables_.rotary_global = RotaryTable(c.rope_theta, c.head_dim(), c.max_positions());
    // The local layers' table only where they exist with a theta of their own.
    if (c.local_window > 0 && c.local_rope_theta != c.rope_theta)
      tables_.rotary_local = RotaryTable(c.local_rope_theta, c.head_dim(), c.max_positions());
  }
  dense_zero_bias_.reserve(w.dense.size());  // no reallocation: dense_ points into it
  for (size_t i = 0; i < w.dense.size(); ++i) {
    const DenseSpec& d = c.dense[i];
    const Tensor* bias = &w.dense[i].b;
    if (bias->empty()) bias = &dense_zero_bias_.emplace_back(Tensor::ZerosF32({d.out_features}));
    ASSIGN_OR_RETURN(cpu::Linear dense,
                     MakeLinear({&w.dense[i].w}, {bias}, d.in_features, "Dense module"));
    dense_.push_back(std::move(dense));
  }
  weights_.dense = &dense_;
  return Status::Ok();
}

StatusOr<BatchOutputs> CpuEngine::Run(const RaggedBatch& batch, const RunOptions& options) {
  RETURN_IF_ERROR(ValidateBatch(batch, model_->config));
  std::lock_guard<std::mutex> lock(mu_);
  BatchOutputs out;
  if (batch.num_seqs() == 0) return out;
  const ModelConfig& c = model_->config;
  workspace_.Reserve(c, batch, classifier_.out(), threads_, EncoderOps::kMaskedLmChunkTokens);
  peak_bytes_.store(workspace_.bytes());
  // oneDNN threads each GEMM over omp_get_max_threads() of the calling
  // thread: set it for this run and give the caller's setting back.
  const int caller_threads = omp_get_max_threads();
  omp_set_num_threads(threads_);
  EncoderOps ops(c, tables_, batch, workspace_, &matmul_, threads_);
  const ops::Batch shape{batch.num_tokens(), batch.num_seqs(), batch.max_len,
                         options.last_hidden_state,
                         OutputsReadOnlyFirstTokens(outputs_, options.last_hidden_state)};
  Status status = model::EncoderForward<EncoderOps>(c, weights_, ops, shape).Run();
  omp_set_num_threads(caller_threads);
  RETURN_IF_ERROR(status);
  // Every array the outputs read, where the forward left it.
  HostArrays arrays;
  for (const OutputDescription& o : outputs_)
    arrays[o.array] = {model::HeadArrayIn(c, workspace_.buffers(), o.array), o.array_width};
  return AssembleOutputs(outputs_, options.last_hidden_state, arrays, batch.num_tokens(),
                         batch.num_seqs());
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

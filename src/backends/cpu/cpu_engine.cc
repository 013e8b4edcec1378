// The fp32 CPU engine: packed weights prepared once, one workspace grown on
// demand, and the one forward (model/encoder_forward.h) on the CPU's ops over
// the ragged batch, with no padding anywhere.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <deque>
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
#include "model/weight_schema.h"

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
  // Makes the forward's weights for PrepareWeights: GEMM weights packed,
  // concatenated and reordered for oneDNN; LayerNorms read in place.
  struct Maker {
    CpuEngine* engine;
    StatusOr<cpu::Linear> Linear(const std::vector<const Tensor*>& w,
                                 const std::vector<const Tensor*>& b, const std::string& name) {
      ASSIGN_OR_RETURN(cpu::PackedLinear packed,
                       cpu::PackLinear(w, b, static_cast<int>(w[0]->dim(1)), name.c_str()));
      return cpu::Linear::Create(std::move(packed), &engine->matmul_);
    }
    // A Dense module without a bias gets zeros (the GEMM adds one).
    StatusOr<cpu::Linear> SmallLinear(const Tensor& w, const Tensor* b, const std::string& name) {
      if (!b) b = &engine->zero_biases_.emplace_back(Tensor::ZerosF32({w.dim(0)}));
      return Linear({&w}, {b}, name);
    }
    StatusOr<ops::Norm> Norm(const Tensor& gamma, const Tensor& beta, const std::string&) {
      return ops::Norm{gamma.f32(), beta.f32()};
    }
  };

  std::shared_ptr<const Model> model_;
  const std::vector<OutputDescription> outputs_;  // what Run returns
  int threads_;
  std::deque<Tensor> zero_biases_;  // for Dense modules without a bias
  model::Weights<EncoderOps> weights_;
  cpu::ModelTables tables_;
  std::mutex mu_;  // Run shares the workspace and the matmul context
  cpu::MatmulContext matmul_;
  cpu::Workspace workspace_;
  std::atomic<size_t> peak_bytes_{0};  // readable while a Run holds mu_
};

Status CpuEngine::Init() {
  RETURN_IF_ERROR(CheckModel(*model_));
  RETURN_IF_ERROR(matmul_.Init());
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  Maker maker{this};
  ASSIGN_OR_RETURN(weights_, model::PrepareWeights<EncoderOps>(
                                 w, model::WeightSchema(c, HeadUsesPooler(*model_),
                                                        !w.mlm_decoder_w.empty()),
                                 maker));
  // Token i reads position row position_offset + i (RoBERTa-family); rotary
  // models have no table.
  const float* positions =
      w.position_embeddings.empty()
          ? nullptr
          : w.position_embeddings.f32() + size_t(c.position_offset) * c.hidden_size;
  tables_.embeddings = {w.word_embeddings.f32(), positions, w.token_type_embeddings.f32(),
                        weights_.embedding_norm.gamma, weights_.embedding_norm.beta};
  tables_.relative_bias = RelativePositionBiasTable(c, w);
  if (c.rope_theta > 0.0f) {
    tables_.rotary_global = RotaryTable(c.rope_theta, c.head_dim(), c.max_positions());
    // The local layers' table only where they exist with a theta of their own.
    if (c.local_window > 0 && c.local_rope_theta != c.rope_theta)
      tables_.rotary_local = RotaryTable(c.local_rope_theta, c.head_dim(), c.max_positions());
  }
  return Status::Ok();
}

StatusOr<BatchOutputs> CpuEngine::Run(const RaggedBatch& batch, const RunOptions& options) {
  RETURN_IF_ERROR(ValidateBatch(batch, model_->config));
  std::lock_guard<std::mutex> lock(mu_);
  BatchOutputs out;
  if (batch.num_seqs() == 0) return out;
  const ModelConfig& c = model_->config;
  workspace_.Reserve(c, batch, weights_.classifier ? weights_.classifier->out() : 0, threads_,
                     EncoderOps::kMaskedLmChunkTokens);
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

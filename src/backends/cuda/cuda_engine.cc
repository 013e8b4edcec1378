// The CUDA engine: weights uploaded once, one activation pool grown on demand,
// and a forward pass over the packed ragged batch (no padding anywhere) on the
// engine's own stream: fused embedding + LayerNorm, cuBLASLt GEMMs with bias /
// activation / residual epilogues, fused variable-length attention, LayerNorm,
// then the head, whose fp32 outputs are the only data copied back.
#include "bertrt/cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_weights.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels.h"
#include "bertrt/devices.h"
#include "runtime/model_check.h"
#include "runtime/outputs.h"

namespace bertrt {
namespace {

using cuda::DeviceBuffer;
using cuda::PinnedBuffer;

constexpr size_t kGemmWorkspaceBytes = 32 << 20;
constexpr size_t kAlign = 256;
// The pool grows in steps of this many tokens, so slowly growing batches do
// not reallocate every time.
constexpr int kTokenGranularity = 256;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Views into the activation pool and the pinned staging buffers, laid out for
// a capacity of `tokens` tokens (every sequence has a token, so sequences <= tokens).
struct Workspace {
  void *x, *tmp, *qkv, *ctx, *inter;  // compute precision
  float *hidden_f32, *pooled_f32, *logits_f32;
  int32_t *ids, *types, *cu;  // device copies of the batch
  int32_t* host_ints;         // pinned: ids | types | cu, one copy
  float* host_floats;         // pinned: the outputs coming back
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(std::shared_ptr<const Model> model, const CudaEngineOptions& options, GpuInfo gpu)
      : model_(std::move(model)), options_(options), gpu_(std::move(gpu)) {}
  ~CudaEngine() override;

  Status Init();
  StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) override;
  const ModelConfig& config() const override { return model_->config; }
  std::string device() const override {
    return "cuda:" + std::to_string(gpu_.index) + " (" + gpu_.name + ", " +
           PrecisionName(options_.precision) + ")";
  }
  size_t PeakMemoryBytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_.size() + gemm_.workspace_bytes();
  }

 private:
  size_t ElementSize() const { return options_.precision == Precision::kFp32 ? 4 : 2; }
  int LogitsWidth() const { return std::max(weights_.classifier_out, 1); }
  // Byte sizes of the pool's regions for `tokens` tokens, in Workspace order.
  std::vector<size_t> PoolRegions(size_t tokens) const;
  Status Reserve(int tokens);
  Status Encoder(const RaggedBatch& batch);
  Status Heads(const RaggedBatch& batch, const RunOptions& options, BatchOutputs* out);

  std::shared_ptr<const Model> model_;
  CudaEngineOptions options_;
  GpuInfo gpu_;
  cudaStream_t stream_ = nullptr;
  cuda::DeviceWeights weights_;
  cuda::LtGemm gemm_;
  cuda::Epilogue ffn_epilogue_ = cuda::Epilogue::kBias;
  bool ffn_activation_kernel_ = true;  // the activation is not in the GEMM epilogue

  mutable std::mutex mu_;  // Run shares the pool and the stream
  int capacity_tokens_ = 0;
  DeviceBuffer pool_;
  PinnedBuffer host_ints_, host_floats_;
  Workspace ws_{};
};

CudaEngine::~CudaEngine() {
  cudaSetDevice(gpu_.index);
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

Status CudaEngine::Init() {
  RETURN_IF_ERROR(CheckModel(*model_));
  const ModelConfig& c = model_->config;
  if (c.head_dim() > cuda::kMaxAttentionHeadDim)
    return Unimplemented("cuda engine: head dim " + std::to_string(c.head_dim()) +
                         " is above the " + std::to_string(cuda::kMaxAttentionHeadDim) +
                         " it supports; use --device cpu");
  CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu_.index));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RETURN_IF_ERROR(gemm_.Init(options_.precision, kGemmWorkspaceBytes));
  ASSIGN_OR_RETURN(weights_, cuda::UploadWeights(*model_, options_.precision, stream_));
  // The fp32 engine keeps every activation in its own kernel so that it
  // matches the CPU engine's exact formulas; cuBLASLt's GELU epilogue is the
  // tanh form, so the erf GELU always runs as a kernel.
  if (options_.precision != Precision::kFp32 && c.hidden_act != HiddenAct::kGelu) {
    ffn_epilogue_ = c.hidden_act == HiddenAct::kGeluTanh ? cuda::Epilogue::kBiasGeluTanh
                                                         : cuda::Epilogue::kBiasRelu;
    ffn_activation_kernel_ = false;
  }
  if (options_.max_batch_tokens > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(Reserve(options_.max_batch_tokens));
  }
  return Status::Ok();
}

std::vector<size_t> CudaEngine::PoolRegions(size_t t) const {
  const ModelConfig& c = model_->config;
  const size_t h = c.hidden_size, e = ElementSize();
  return {t * h * e,     t * h * e, t * 3 * h * e, t * h * e, t * c.intermediate_size * e,
          t * h * 4,     t * h * 4, t * LogitsWidth() * 4,
          t * 4,         t * 4,     (t + 1) * 4};
}

Status CudaEngine::Reserve(int tokens) {
  if (tokens <= capacity_tokens_) return Status::Ok();
  const int t = (tokens + kTokenGranularity - 1) / kTokenGranularity * kTokenGranularity;
  const std::vector<size_t> regions = PoolRegions(t);
  size_t total = 0;
  for (size_t r : regions) total += AlignUp(r);
  const std::string hint =
      "send smaller batches (fewer tokens per batch)" +
      std::string(options_.max_batch_tokens > 0 ? " or lower max_batch_tokens" : "");
  // Free the old pool first: the two need not fit side by side.
  capacity_tokens_ = 0;
  RETURN_IF_ERROR(pool_.Allocate(
      total, "activations of " + std::to_string(t) + " tokens", hint));
  std::vector<char*> p;
  char* next = static_cast<char*>(pool_.get());
  for (size_t r : regions) {
    p.push_back(next);
    next += AlignUp(r);
  }
  const size_t int_count = 3 * static_cast<size_t>(t) + 1;
  // hidden states, pooled rows and logits can all come back from one batch.
  const size_t float_count = (regions[5] + regions[6] + regions[7]) / sizeof(float);
  RETURN_IF_ERROR(host_ints_.Allocate(int_count * sizeof(int32_t), "batch ids"));
  RETURN_IF_ERROR(host_floats_.Allocate(float_count * sizeof(float), "outputs"));
  ws_ = Workspace{p[0], p[1], p[2], p[3], p[4],
                  reinterpret_cast<float*>(p[5]), reinterpret_cast<float*>(p[6]),
                  reinterpret_cast<float*>(p[7]), reinterpret_cast<int32_t*>(p[8]),
                  reinterpret_cast<int32_t*>(p[9]), reinterpret_cast<int32_t*>(p[10]),
                  static_cast<int32_t*>(host_ints_.get()), static_cast<float*>(host_floats_.get())};
  capacity_tokens_ = t;
  return Status::Ok();
}

Status CudaEngine::Encoder(const RaggedBatch& batch) {
  const ModelConfig& c = model_->config;
  const Precision p = options_.precision;
  const int t = batch.num_tokens(), n = batch.num_seqs(), h = c.hidden_size;
  const int inter = c.intermediate_size;
  RETURN_IF_ERROR(cuda::EmbedLayerNorm(
      p,
      {ws_.ids, ws_.types, ws_.cu, n, t, weights_.word, weights_.position, weights_.type,
       weights_.emb_gamma, weights_.emb_beta, h, c.layer_norm_eps, ws_.x},
      stream_));
  const cuda::AttentionArgs attention{ws_.qkv, ws_.cu,  n, batch.max_len, h, c.num_heads,
                                      ws_.ctx, gpu_.compute_capability >= 80};
  for (const cuda::DeviceLayer& l : weights_.layers) {
    RETURN_IF_ERROR(gemm_.Linear(ws_.x, t, h, l.qkv_w, l.qkv_b, 3 * h, cuda::Epilogue::kBias,
                                 nullptr, ws_.qkv, stream_));
    RETURN_IF_ERROR(cuda::Attention(p, attention, stream_));
    // The residual enters through the GEMM's C operand (beta = 1).
    RETURN_IF_ERROR(gemm_.Linear(ws_.ctx, t, h, l.attn_out_w, l.attn_out_b, h,
                                 cuda::Epilogue::kBias, ws_.x, ws_.tmp, stream_));
    RETURN_IF_ERROR(cuda::LayerNorm(p, ws_.tmp, ws_.x, t, h, l.attn_gamma, l.attn_beta,
                                    c.layer_norm_eps, stream_));
    RETURN_IF_ERROR(gemm_.Linear(ws_.x, t, h, l.ffn_in_w, l.ffn_in_b, inter, ffn_epilogue_,
                                 nullptr, ws_.inter, stream_));
    if (ffn_activation_kernel_)
      RETURN_IF_ERROR(cuda::ActivationInPlace(p, c.hidden_act, ws_.inter,
                                              static_cast<size_t>(t) * inter, stream_));
    RETURN_IF_ERROR(gemm_.Linear(ws_.inter, t, inter, l.ffn_out_w, l.ffn_out_b, h,
                                 cuda::Epilogue::kBias, ws_.x, ws_.tmp, stream_));
    RETURN_IF_ERROR(cuda::LayerNorm(p, ws_.tmp, ws_.x, t, h, l.ffn_gamma, l.ffn_beta,
                                    c.layer_norm_eps, stream_));
  }
  return Status::Ok();
}

Status CudaEngine::Heads(const RaggedBatch& batch, const RunOptions& options,
                         BatchOutputs* out) {
  const ModelConfig& c = model_->config;
  const Precision p = options_.precision;
  const int t = batch.num_tokens(), n = batch.num_seqs(), h = c.hidden_size;
  // An output computed on the device in fp32, to be copied back.
  struct Pending {
    std::string name;
    bool per_token;
    int width;
    size_t rows;
    const float* device;
  };
  std::vector<Pending> pending;
  if (weights_.pooler_w) {
    // ctx and tmp are free once the encoder is done.
    RETURN_IF_ERROR(cuda::GatherFirstTokens(p, ws_.x, ws_.cu, n, h, ws_.ctx, stream_));
    RETURN_IF_ERROR(gemm_.Linear(ws_.ctx, n, h, weights_.pooler_w, weights_.pooler_b, h,
                                 cuda::Epilogue::kBias, nullptr, ws_.tmp, stream_));
    RETURN_IF_ERROR(
        cuda::TanhToFloat(p, ws_.tmp, ws_.pooled_f32, static_cast<size_t>(n) * h, stream_));
  }
  const int labels = weights_.classifier_out;
  switch (c.head) {
    case HeadKind::kBase:
      if (weights_.pooler_w) pending.push_back({"pooler_output", false, h, size_t(n), ws_.pooled_f32});
      break;
    case HeadKind::kSequenceClassification:
      RETURN_IF_ERROR(cuda::SmallLinear(Precision::kFp32, ws_.pooled_f32, n, h,
                                        weights_.classifier_w, weights_.classifier_b, labels,
                                        ws_.logits_f32, stream_));
      pending.push_back({"logits", false, labels, size_t(n), ws_.logits_f32});
      break;
    case HeadKind::kTokenClassification:
    case HeadKind::kQuestionAnswering:
      RETURN_IF_ERROR(cuda::SmallLinear(p, ws_.x, t, h, weights_.classifier_w,
                                        weights_.classifier_b, labels, ws_.logits_f32, stream_));
      pending.push_back({"logits", true, labels, size_t(t), ws_.logits_f32});
      break;
    case HeadKind::kSentenceEmbedding:
      RETURN_IF_ERROR(cuda::PoolSequences(p, ws_.x, ws_.cu, n, h, c.pooling, ws_.pooled_f32,
                                          stream_));
      if (c.normalize) RETURN_IF_ERROR(cuda::L2NormalizeRows(ws_.pooled_f32, n, h, stream_));
      pending.push_back({"embedding", false, h, size_t(n), ws_.pooled_f32});
      break;
  }
  if (options.last_hidden_state) {
    RETURN_IF_ERROR(cuda::ConvertToFloat(p, ws_.x, ws_.hidden_f32, static_cast<size_t>(t) * h,
                                         stream_));
    pending.push_back({"last_hidden_state", true, h, size_t(t), ws_.hidden_f32});
  }

  std::vector<const float*> host;
  float* next = ws_.host_floats;
  for (const Pending& o : pending) {
    const size_t count = o.rows * o.width;
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(next, o.device, count * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
    host.push_back(next);
    next += count;
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < pending.size(); ++i) {
    const Pending& o = pending[i];
    if (c.head == HeadKind::kQuestionAnswering && o.name == "logits")
      AppendQuestionAnsweringOutputs(host[i], o.rows, out);
    else
      out->outputs.push_back(MakeOutput(o.name, o.per_token, o.width, host[i], o.rows));
  }
  return Status::Ok();
}

StatusOr<BatchOutputs> CudaEngine::Run(const RaggedBatch& batch, const RunOptions& options) {
  RETURN_IF_ERROR(ValidateBatch(batch, model_->config));
  BatchOutputs out;
  const int t = batch.num_tokens(), n = batch.num_seqs();
  if (n == 0) return out;
  if (options_.max_batch_tokens > 0 && t > options_.max_batch_tokens)
    return InvalidArgument("cuda engine: the batch has " + std::to_string(t) +
                           " tokens, more than max_batch_tokens " +
                           std::to_string(options_.max_batch_tokens) +
                           "; split it or raise max_batch_tokens");
  std::lock_guard<std::mutex> lock(mu_);
  CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu_.index));
  RETURN_IF_ERROR(Reserve(t));
  // Staged in pinned memory so the copy is a true async DMA on our stream.
  int32_t* h = ws_.host_ints;
  std::memcpy(h, batch.input_ids.data(), t * sizeof(int32_t));
  std::memcpy(h + t, batch.token_type_ids.data(), t * sizeof(int32_t));
  std::memcpy(h + 2 * t, batch.cu_seqlens.data(), (n + 1) * sizeof(int32_t));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws_.ids, h, t * sizeof(int32_t), cudaMemcpyHostToDevice,
                                       stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws_.types, h + t, t * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws_.cu, h + 2 * t, (n + 1) * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream_));
  RETURN_IF_ERROR(Encoder(batch));
  RETURN_IF_ERROR(Heads(batch, options, &out));
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                   const CudaEngineOptions& options) {
  if (!model) return InvalidArgument("cuda engine: no model");
  ASSIGN_OR_RETURN(std::vector<GpuInfo> gpus, ListGpus());
  if (options.device < 0 || options.device >= static_cast<int>(gpus.size()))
    return InvalidArgument("cuda engine: device " + std::to_string(options.device) +
                           " does not exist; this machine has " + std::to_string(gpus.size()) +
                           " GPU(s) (0.." + std::to_string(gpus.size() - 1) + ")");
  if (options.max_batch_tokens < 0)
    return InvalidArgument("cuda engine: max_batch_tokens must be >= 0 (0: grow on demand)");
  auto engine = std::make_unique<CudaEngine>(std::move(model), options, gpus[options.device]);
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace bertrt

// The CUDA engine: weights uploaded once (device_weights.h), one activation
// pool grown on demand (activation_pool.h), and per batch: its ints staged in
// one copy (batch_staging.h), the forward over the packed ragged batch
// (encoder_forward.h) on the engine's own stream, and the head's fp32 outputs
// copied back.
//
// Launch overhead dominates small batches, so each batch runs as a padded
// shape (a bucket, batch_shape.h) and the whole forward (kernels and
// cuBLASLt calls, after the host-to-device input copy) replays as one CUDA
// graph captured for that bucket (graph_cache.h). The padding tokens form
// dummy sequences appended after the real ones: every kernel reads
// cu_seqlens from device memory, attention never crosses a sequence and the
// rest is row-wise, so the dummies never touch a real row, and one graph
// serves every batch whose shape rounds to its bucket.
#include "bertrt/cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/engine/activation_pool.h"
#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/engine/batch_staging.h"
#include "backends/cuda/engine/device_weights.h"
#include "backends/cuda/engine/encoder_forward.h"
#include "backends/cuda/engine/graph_cache.h"
#include "backends/cuda/engine/op_profiler.h"
#include "backends/cuda/engine/tuning.h"
#include "backends/cuda/gemm/gemm.h"
#include "backends/cuda/gemm/int8_gemm.h"
#include "backends/cuda/gemm/linear.h"
#include "backends/cuda/ops/attention.h"
#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/util/cuda_check.h"
#include "bertrt/devices.h"
#include "bertrt/quantized_weights.h"
#include "core/startup_trace.h"
#include "model/model_check.h"
#include "model/outputs.h"

namespace bertrt {
namespace {

using cuda::Shape;
using cuda::Workspace;

class CudaEngine final : public Engine {
 public:
  CudaEngine(std::shared_ptr<const Model> model, const CudaEngineOptions& options,
             const cuda::Tuning& tuning, GpuInfo gpu)
      : model_(std::move(model)),
        outputs_(DescribeOutputs(*model_)),
        options_(options),
        tuning_(tuning),
        gpu_(std::move(gpu)) {}
  ~CudaEngine() override;

  Status Init();
  StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) override;
  void WaitForBackgroundWork() override { graphs_->WaitIdle(); }
  std::string ShapeKey(const RaggedBatch& batch, const RunOptions& options) const override {
    std::lock_guard<std::mutex> lock(mu_);  // the pool's capacity
    const Shape s = ShapeFor(batch, options);
    return std::to_string(s.tokens) + "/" + std::to_string(s.seqs) + "/" +
           std::to_string(s.max_len) + (s.hidden_state ? "/hidden" : "") +
           (s.normalize ? "" : "/unnormalized");
  }
  size_t KeptShapes() const override {
    return graphs_->enabled() ? cuda::GraphCache::kMaxGraphs : 0;
  }
  const ModelConfig& config() const override { return model_->config; }
  // An 8-bit model's report, measured when it was quantized (on the CPU:
  // its int8 GEMMs, or its emulation of the FP8 ones; the model's check
  // holds this engine to it).
  std::optional<QuantizationReport> Quantization() const override {
    if (!model_->quantized) return std::nullopt;
    return model_->quantized->report;
  }
  std::string device() const override {
    const std::string graphs_off = graphs_->off_reason();
    return "cuda:" + std::to_string(gpu_.index) + " (" + gpu_.name + ", " +
           PrecisionName(options_.precision) +
           (forward_->ErfGeluAsTanh() ? ", erf GELU as tanh" : "") +
           (kernel_cc_ < gpu_.compute_capability
                ? ", kernels built for sm_" + std::to_string(kernel_cc_)
                : "") +
           (tuning_.time_gemms ? ", GEMMs timed at first use" : "") + ")" +
           (graphs_off.empty() ? "" : " [CUDA graphs off: " + graphs_off + "]");
  }
  size_t PeakMemoryBytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_->bytes() + gemm_.workspace_bytes();
  }
  std::vector<OpProfile> Profile() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return profiler_.Totals();
  }

 private:
  Shape ShapeFor(const RaggedBatch& batch, const RunOptions& options) const;
  // Grows the pool to `tokens` tokens in `seqs` sequences where it is
  // smaller, dropping the graphs that pointed into it.
  Status Reserve(int tokens, int seqs);
  // Replays the shape's graph, or runs the forward eagerly and has the graph
  // captured.
  Status Forward(const Shape& shape);
  // The forward on `stream`; a profiling engine's stamps the time after each
  // operation and, with `remember_ops`, keeps the shape's list of them.
  Status Compute(const Shape& shape, const Workspace& ws, cudaStream_t stream, bool remember_ops);
  Status CopyBack(const RaggedBatch& batch, bool hidden_state, BatchOutputs* out);

  std::shared_ptr<const Model> model_;
  const std::vector<OutputDescription> outputs_;  // what Run returns
  CudaEngineOptions options_;
  cuda::Tuning tuning_;
  GpuInfo gpu_;
  int sm_count_ = 0;
  // The compute capability the kernels run as (KernelComputeCapability):
  // what every choice of kernel rests on, not the GPU's own.
  int kernel_cc_ = 0;
  // Tuning::overlap_kernel_launches, where the kernels have them.
  bool overlap_launch_ = false;
  cudaStream_t stream_ = nullptr;
  cuda::DeviceWeights weights_;
  cuda::LtGemm gemm_;
  std::unique_ptr<cuda::LinearLayers> linear_;
  std::unique_ptr<cuda::EncoderForward> forward_;
  cuda::OpProfiler profiler_;

  mutable std::mutex mu_;  // Run shares the pool, the stream and the profiler
  std::unique_ptr<cuda::ActivationPool> pool_;
  uint64_t runs_ = 0;  // batches run (the first is traced)
  // The staged batch's sequences in their device order, when they were
  // packed into attention windows (StageBatch); empty when they keep the
  // batch's order.
  std::vector<int> layout_order_;
  // CopyBack's outputs in the batch's order when layout_order_ is not; kept
  // (at the size of the largest such batch) so that no batch allocates it.
  std::vector<float> host_reordered_;
  // Last: its capture thread runs the forward, so it goes first.
  std::unique_ptr<cuda::GraphCache> graphs_;
};

CudaEngine::~CudaEngine() {
  graphs_.reset();
  cudaSetDevice(gpu_.index);
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

Status CudaEngine::Init() {
  RETURN_IF_ERROR(CheckModel(*model_));
  const ModelConfig& c = model_->config;
  const QuantizedWeights* quantized = model_->quantized.get();
  const std::string format = quantized ? QuantFormatName(quantized->format) : "";
  const bool int8 = quantized && quantized->format == QuantFormat::kInt8;
  if (quantized && !int8 && gpu_.compute_capability < 89)
    return Unimplemented(model_->source + " is fp8, whose GEMMs need FP8 tensor cores (sm_89 "
                         "and newer); " + gpu_.name + " is sm_" +
                         std::to_string(gpu_.compute_capability) + ": use an fp16 or bf16 plan");
  if (quantized && options_.precision == Precision::kFp32)
    return InvalidArgument(model_->source + " is " + format +
                           ": its other operations run in fp16 or bf16, not fp32");
  if (int8 && options_.precision != Precision::kFp16)
    return InvalidArgument(model_->source + " is int8: its other operations run in fp16");
  if (c.head_dim() > cuda::kMaxAttentionHeadDim)
    return Unimplemented("cuda engine: head dim " + std::to_string(c.head_dim()) +
                         " is above the " + std::to_string(cuda::kMaxAttentionHeadDim) +
                         " it supports; use --device cpu");
  CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu_.index));
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, gpu_.index));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ASSIGN_OR_RETURN(const int code_cc, cuda::KernelComputeCapability(stream_));
  kernel_cc_ = std::min(gpu_.compute_capability, code_cc);
  if (kernel_cc_ < gpu_.compute_capability && options_.on_notice)
    options_.on_notice("this build has no kernels for " + gpu_.name + " (sm_" +
                       std::to_string(gpu_.compute_capability) + "): they run as sm_" +
                       std::to_string(kernel_cc_) +
                       " code, on the paths of older GPUs (slower); build with the default "
                       "CMAKE_CUDA_ARCHITECTURES, or one that names this GPU's");
  if (int8 && !cuda::Int8GemmApplies(options_.precision, kernel_cc_, 16, 16))
    return Unimplemented(model_->source + " is int8, whose GEMMs run on Hopper's integer tensor "
                         "cores (bertrt's sm_90a kernel; " +
                         (cuda::Int8GemmBuilt() ? gpu_.name + " runs sm_" +
                                                      std::to_string(kernel_cc_) + " code"
                                                : std::string("not in this build")) +
                         "): serve it with --device cpu, or build an fp8, fp16 or bf16 plan");
  overlap_launch_ = tuning_.overlap_kernel_launches && kernel_cc_ >= 90;
  RETURN_IF_ERROR(gemm_.Init(options_.precision, cuda::kGemmWorkspaceBytes, gpu_.name,
                             tuning_.time_gemms));
  TraceStartup("cuda engine: cuBLASLt handle created");
  ASSIGN_OR_RETURN(weights_, cuda::UploadWeights(*model_, options_.precision, stream_));
  TraceStartup("cuda engine: weights uploaded");
  linear_ = std::make_unique<cuda::LinearLayers>(gemm_, options_.precision, kernel_cc_,
                                                 sm_count_, tuning_.splitk_gemms,
                                                 tuning_.fused_gelu_gemm, overlap_launch_);
  forward_ = std::make_unique<cuda::EncoderForward>(c, outputs_, options_, tuning_, weights_,
                                                    *linear_, kernel_cc_, sm_count_,
                                                    overlap_launch_);
  pool_ = std::make_unique<cuda::ActivationPool>(
      c, DTypeSize(PrecisionDType(options_.precision)),
      std::max(weights_.forward.classifier ? weights_.forward.classifier->out : 0, 1),
      quantized != nullptr);
  // A dummy sequence can be 64 tokens long; its positions must exist.
  const bool graphs = c.max_positions() >= cuda::kLenBucket && tuning_.cuda_graphs;
  graphs_ = std::make_unique<cuda::GraphCache>(
      gpu_.index, graphs, [this](const Shape& shape, const Workspace& ws, cudaStream_t stream) {
        return Compute(shape, ws, stream, /*remember_ops=*/false);
      });
  RETURN_IF_ERROR(graphs_->Init());
  if (options_.profile) RETURN_IF_ERROR(profiler_.Init(forward_->MaxOperations()));
  if (options_.max_batch_tokens > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(Reserve(options_.max_batch_tokens, 1));
  }
  return Status::Ok();
}

Status CudaEngine::Reserve(int tokens, int seqs) {
  if (pool_->Fits(tokens, seqs)) return Status::Ok();
  const Status reserved = pool_->Reserve(
      tokens, seqs, "send smaller batches (fewer tokens per batch)" +
                  std::string(options_.max_batch_tokens > 0 ? " or lower max_batch_tokens" : ""));
  // The graphs point into the old pool, which is gone either way.
  graphs_->Invalidate(pool_->generation());
  return reserved;
}

Shape CudaEngine::ShapeFor(const RaggedBatch& batch, const RunOptions& options) const {
  const int t = batch.num_tokens(), n = batch.num_seqs();
  // From cu_seqlens rather than batch.max_len: the attention grid rests on it.
  int max_len = 0;
  for (int s = 0; s < n; ++s)
    max_len = std::max(max_len, batch.cu_seqlens[s + 1] - batch.cu_seqlens[s]);
  const Shape exact{t, n, max_len, options.last_hidden_state, options.normalize};
  if (!graphs_->enabled()) return exact;
  Shape padded = cuda::PaddedShape(t, n, max_len, options.last_hidden_state);
  padded.normalize = options.normalize;
  // A fixed reservation is never grown for padding.
  if (options_.max_batch_tokens > 0 && !pool_->Fits(padded.tokens, padded.seqs)) return exact;
  return padded;
}

Status CudaEngine::Forward(const Shape& shape) {
  ASSIGN_OR_RETURN(const bool replayed, graphs_->Launch(shape, stream_));
  if (replayed) return Status::Ok();
  // Eagerly, which also builds the shape's GEMM plans before the capture
  // needs them.
  const Workspace& ws = pool_->workspace();
  RETURN_IF_ERROR(Compute(shape, ws, stream_, /*remember_ops=*/true));
  graphs_->Request(shape, ws, pool_->generation());
  return Status::Ok();
}

Status CudaEngine::Compute(const Shape& shape, const Workspace& ws, cudaStream_t stream,
                           bool remember_ops) {
  if (!options_.profile) return forward_->Run(shape, ws, stream, nullptr);
  cuda::OpTrace trace = profiler_.Trace();
  RETURN_IF_ERROR(trace.Open(stream));
  RETURN_IF_ERROR(forward_->Run(shape, ws, stream, &trace));
  if (remember_ops) profiler_.Remember(shape, trace.TakeOps());
  return Status::Ok();
}

// Only the real rows come back: the dummy sequences follow the real ones.
// Each head array the outputs read comes back in one copy (the columns they
// read: truncate_dim's first values, both of question answering's logits).
Status CudaEngine::CopyBack(const RaggedBatch& batch, bool hidden_state, BatchOutputs* out) {
  const Workspace& ws = pool_->workspace();
  const std::vector<ArraySpan> spans = ArraySpans(outputs_, hidden_state);
  HostArrays host;
  std::vector<size_t> rows;
  float* next = ws.host_floats;
  for (const ArraySpan& s : spans) {
    rows.push_back(s.per_token ? batch.num_tokens() : batch.num_seqs());
    const int width = s.end - s.begin;
    const float* device = forward_->DeviceArray(ws, s.array) + s.begin;
    CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(next, width * sizeof(float), device,
                                           s.array_width * sizeof(float), width * sizeof(float),
                                           rows.back(), cudaMemcpyDeviceToHost, stream_));
    host[s.array] = {next, width, s.begin};
    next += rows.back() * width;
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (!layout_order_.empty()) {
    host_reordered_.resize(next - ws.host_floats);
    float* into = host_reordered_.data();
    for (size_t i = 0; i < spans.size(); ++i) {
      HostArray& a = host[spans[i].array];
      cuda::RestoreBatchOrder(layout_order_, batch, spans[i].per_token, a.stride, a.data, into);
      a.data = into;
      into += rows[i] * a.stride;
    }
  }
  ASSIGN_OR_RETURN(
      *out, AssembleOutputs(outputs_, hidden_state, host, batch.num_tokens(), batch.num_seqs()));
  return Status::Ok();
}

StatusOr<BatchOutputs> CudaEngine::Run(const RaggedBatch& batch, const RunOptions& options) {
  RETURN_IF_ERROR(ValidateBatch(batch, model_->config));
  BatchOutputs out;
  const int t = batch.num_tokens(), n = batch.num_seqs();
  if (n == 0) return out;
  if (options_.max_batch_tokens > 0 && t > options_.max_batch_tokens)
    return InvalidArgument(
        "cuda engine: the batch has " + std::to_string(t) + " tokens, more than max_batch_tokens " +
        std::to_string(options_.max_batch_tokens) + "; split it or raise max_batch_tokens");
  std::lock_guard<std::mutex> lock(mu_);
  CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu_.index));
  const Shape shape = ShapeFor(batch, options);
  const bool first = runs_++ == 0;
  RETURN_IF_ERROR(Reserve(shape.tokens, shape.seqs));
  const Workspace& ws = pool_->workspace();
  ASSIGN_OR_RETURN(layout_order_,
                   cuda::StageBatch(batch, shape, model_->config.takes_token_types,
                                    forward_->TakesWindows(shape, ws), model_->config.num_heads,
                                    sm_count_, ws, stream_));
  if (first) TraceStartup("cuda engine: first batch staged");
  RETURN_IF_ERROR(Forward(shape));
  if (first) TraceStartup("cuda engine: first forward enqueued");
  RETURN_IF_ERROR(CopyBack(batch, options.last_hidden_state, &out));
  if (first) TraceStartup("cuda engine: first results copied back");
  if (options_.profile) RETURN_IF_ERROR(profiler_.Accumulate(shape, stream_));
  return out;
}

}  // namespace

namespace cuda {

StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                   const CudaEngineOptions& options,
                                                   const Tuning& tuning) {
  if (!model) return InvalidArgument("cuda engine: no model");
  ASSIGN_OR_RETURN(std::vector<GpuInfo> gpus, ListGpus());
  if (options.device < 0 || options.device >= static_cast<int>(gpus.size()))
    return InvalidArgument("cuda engine: device " + std::to_string(options.device) +
                           " does not exist; this machine has " + std::to_string(gpus.size()) +
                           " GPU(s) (0.." + std::to_string(gpus.size() - 1) + ")");
  if (options.max_batch_tokens < 0)
    return InvalidArgument("cuda engine: max_batch_tokens must be >= 0 (0: grow on demand)");
  CudaEngineOptions resolved = options;
  Tuning resolved_tuning = tuning;
  // A plan's limit applies unless the caller set its own.
  if (resolved.max_batch_tokens == 0) resolved.max_batch_tokens = model->max_batch_tokens;
  if (model->gemm_choices) {
    // A plan's GEMM choices serve where they were timed (this GPU model,
    // cuBLASLt version and precision); elsewhere the engine times its own.
    RETURN_IF_ERROR(cuda::AddGemmChoices(*model->gemm_choices));
    const GpuInfo& gpu = gpus[options.device];
    ASSIGN_OR_RETURN(const std::string prefix, cuda::GemmChoicePrefix(gpu.name, options.precision));
    const bool covered = std::any_of(
        model->gemm_choices->begin(), model->gemm_choices->end(),
        [&](const GemmChoice& c) { return c.gemm.compare(0, prefix.size(), prefix) == 0; });
    // A plan built without a GPU keeps the heuristic, as the model's own
    // directory does (same algorithms, same bits).
    std::string notice;
    if (!covered && model->gemm_choices->empty()) {
      notice =
          "the plan holds no GEMM choices (built without a GPU, or their timing failed): "
          "cuBLASLt's heuristic picks each GEMM's algorithm";
    } else if (!covered && !resolved_tuning.time_gemms) {
      resolved_tuning.time_gemms = true;
      notice = "the plan's " + std::to_string(model->gemm_choices->size()) +
               " GEMM choices were timed for other GPUs, cuBLASLt versions or precisions, not " +
               prefix + ": re-timing each GEMM at its batch shape's first use";
    }
    if (!notice.empty() && resolved.on_notice)
      resolved.on_notice(model->source + ": " + notice +
                         "; `bertrt build --device cuda` on this GPU stores timed choices");
  }
  auto engine = std::make_unique<CudaEngine>(std::move(model), resolved, resolved_tuning,
                                             gpus[options.device]);
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace cuda

StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                   const CudaEngineOptions& options) {
  return cuda::CreateCudaEngine(std::move(model), options, cuda::Tuning::FromEnvironment());
}

}  // namespace bertrt

// The CUDA engine: weights uploaded once, one activation pool grown on demand,
// and a forward pass over the packed ragged batch (no padding anywhere) on the
// engine's own stream: fused embedding + LayerNorm, cuBLASLt GEMMs with bias /
// activation / residual epilogues, fused variable-length attention, LayerNorm,
// then the head, whose fp32 outputs are the only data copied back.
//
// Launch overhead dominates small batches, so each batch runs as a padded
// shape (a bucket) and the whole forward (kernels and cuBLASLt calls, after
// the host-to-device input copy) replays as one CUDA graph captured for that
// bucket. The padding tokens form dummy sequences appended after the real
// ones: every kernel reads cu_seqlens from device memory, attention never
// crosses a sequence and the rest is row-wise, so the dummies never touch a
// real row, and one graph serves every batch whose shape rounds to its
// bucket. Graphs are captured on a thread of the engine's own, off the request
// path: a bucket's batches run eagerly until its graph is ready (a capture
// takes milliseconds, and on the request path it set a server's p99).
#include "bertrt/cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <compare>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/batch_shape.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_weights.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/splitk_gemm.h"
#include "bertrt/devices.h"
#include "core/startup_trace.h"
#include "runtime/model_check.h"
#include "runtime/outputs.h"

namespace bertrt {
namespace {

using cuda::BatchInts;
using cuda::DeviceBuffer;
using cuda::PinnedBuffer;
using cuda::Shape;

constexpr size_t kGemmWorkspaceBytes = 32 << 20;
constexpr size_t kAlign = 256;
// The pool grows in steps of this many tokens, so slowly growing batches do
// not reallocate every time.
constexpr int kTokenGranularity = 256;

// A batch of at most this many tokens (batch 1 at seq 128) has its attention
// kernels prefetch the layer's attention-output and FFN weights into L2 for
// the GEMMs after them. A GEMM at 128 rows reading its weights from HBM took
// 0.5-0.9 us longer than with them in L2 (BERT-base on the H200); batch 1 was
// 1.5-1.7% faster with the prefetch, batches of 256 to 1,024 tokens 0.5-1%
// slower, and larger ones 1.3-1.5% slower (bench/RESULTS.md, 2026-11-30).
constexpr int kPrefetchMaxTokens = 128;
// Captured graphs kept, least recently used evicted first. A server's batches
// vary in three bucketed dimensions, and with 16 graphs the half-load p99 on
// the H200 was set by re-running and re-capturing evicted shapes; a graph
// costs host memory only.
constexpr size_t kMaxGraphs = 256;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The FFN's first GEMM epilogue; with plain kBias the activation runs as a
// kernel of its own. The fp32 engine keeps every activation in its own kernel
// so that it matches the CPU engine's exact formulas; cuBLASLt's GELU
// epilogue is the tanh form, so the erf GELU runs as a kernel unless
// approximated.
cuda::Epilogue FfnEpilogue(const ModelConfig& c, const CudaEngineOptions& options) {
  if (options.precision == Precision::kFp32) return cuda::Epilogue::kBias;
  if (c.hidden_act == HiddenAct::kGeluTanh ||
      (c.hidden_act == HiddenAct::kGelu && options.approximate_erf_gelu))
    return cuda::Epilogue::kBiasGeluTanh;
  if (c.hidden_act == HiddenAct::kRelu) return cuda::Epilogue::kBiasRelu;
  return cuda::Epilogue::kBias;
}

struct GraphExecDeleter {
  void operator()(cudaGraphExec_t exec) const { cudaGraphExecDestroy(exec); }
};
using GraphExec = std::unique_ptr<CUgraphExec_st, GraphExecDeleter>;

struct CachedGraph {
  GraphExec exec;
  uint64_t last_use = 0;
};

// An operation of a profiled forward (CudaEngineOptions::profile).
struct ProfiledOp {
  const char* name;
  double flops;
};

// A profiled forward as it is enqueued: its operations in order, and where
// the timer stamps go on the device. Two stamps open the forward (the time
// between them is one stamp's own cost); the i-th operation's stamp follows
// it in slot i + 2.
struct OpTrace {
  uint64_t* stamps;
  size_t capacity;  // slots
  std::vector<ProfiledOp> ops;
};

// An output computed on the device in fp32, to be copied back.
struct Pending {
  std::string name;
  bool per_token;
  int width;
  const float* device;
};

// Views into the activation pool and the pinned staging buffers, laid out for
// a capacity of `tokens` tokens (a shape has no more sequences than tokens).
struct Workspace {
  void *x, *tmp, *qkv, *ctx, *inter;  // compute precision
  float *hidden_f32, *pooled_f32, *logits_f32;
  int32_t* ints;       // the batch on the device, as BatchInts lays it out
  int32_t* host_ints;  // pinned: the same, staged for one copy
  float* host_floats;  // pinned: the outputs coming back
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(std::shared_ptr<const Model> model, const CudaEngineOptions& options, GpuInfo gpu)
      : model_(std::move(model)), options_(options), gpu_(std::move(gpu)) {}
  ~CudaEngine() override;

  Status Init();
  StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) override;
  void WaitForBackgroundWork() override {
    std::unique_lock<std::mutex> lock(mu_);
    captures_done_.wait(lock, [&] { return capture_queue_.empty() && !capture_running_; });
  }
  std::string ShapeKey(const RaggedBatch& batch, const RunOptions& options) const override {
    std::lock_guard<std::mutex> lock(mu_);  // the capture thread may turn graphs off
    const Shape s = ShapeFor(batch, options);
    return std::to_string(s.tokens) + "/" + std::to_string(s.seqs) + "/" +
           std::to_string(s.max_len) + (s.hidden_state ? "/hidden" : "");
  }
  size_t KeptShapes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return graphs_enabled_ ? kMaxGraphs : 0;
  }
  const ModelConfig& config() const override { return model_->config; }
  std::string device() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return "cuda:" + std::to_string(gpu_.index) + " (" + gpu_.name + ", " +
           PrecisionName(options_.precision) + (ErfGeluAsTanh() ? ", erf GELU as tanh" : "") +
           (options_.time_gemms ? ", GEMMs timed at first use" : "") + ")" +
           (graphs_off_reason_.empty() ? "" : " [CUDA graphs off: " + graphs_off_reason_ + "]");
  }
  size_t PeakMemoryBytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_.size() + gemm_.workspace_bytes();
  }
  std::vector<OpProfile> Profile() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<OpProfile> out;
    for (const auto& [name, p] : profile_) out.push_back(p);
    return out;
  }

 private:
  size_t ElementSize() const { return DTypeSize(PrecisionDType(options_.precision)); }
  int LogitsWidth() const { return std::max(weights_.classifier_out, 1); }
  // Byte sizes of the pool's regions for `tokens` tokens, in Workspace order.
  std::vector<size_t> PoolRegions(size_t tokens) const;
  Status Reserve(int tokens);
  Shape ShapeFor(const RaggedBatch& batch, const RunOptions& options) const;
  Status Stage(const RaggedBatch& batch, const Shape& shape);
  // Replays the shape's graph, or runs the kernels eagerly and has the graph
  // captured.
  Status Forward(const Shape& shape);
  // The capture thread's loop, and one capture (with instantiation and
  // upload) on capture_stream_, unlocked.
  void CaptureLoop();
  StatusOr<GraphExec> Capture(const Shape& shape, const Workspace& ws);
  // Every kernel and GEMM of the forward on `stream`, nothing else. Reads
  // only what Init fixed, `ws` and gemm_ (which locks itself), so the capture
  // thread runs it without mu_.
  // A profiling engine's forward also stamps the time after each operation;
  // `profiled` then receives the operations, in order.
  Status Compute(const Shape& shape, const Workspace& ws, cudaStream_t stream,
                 std::vector<ProfiledOp>* profiled = nullptr);
  // Whether the outputs of `shape` read only each sequence's first token of
  // the last layer (the pooler, CLS pooling; no hidden states asked for).
  bool FirstTokensOnly(const Shape& shape) const;
  // The attention kernel's arguments for `shape` in `ws`; with row_bounds
  // set where the kernel takes packed windows (Stage then lays the batch out
  // in them).
  cuda::AttentionArgs AttentionArgsFor(const Shape& shape, const Workspace& ws) const;
  Status Encoder(const Shape& shape, const Workspace& ws, cudaStream_t stream, OpTrace* trace);
  Status HeadKernels(const Shape& shape, const Workspace& ws, cudaStream_t stream);
  std::vector<Pending> Outputs(bool hidden_state) const;
  // Enqueues `op`, and with a trace, a timer stamp after it.
  template <typename Op>
  Status Timed(OpTrace* trace, const char* name, double flops, cudaStream_t stream, Op&& op);
  // Adds the stamps of the forward of `shape` just run to profile_.
  Status AddToProfile(const Shape& shape);
  // How the engine's own kernels go onto `stream` (cuBLASLt launches its own).
  cuda::Stream KernelStream(cudaStream_t stream) const { return {stream, overlap_launch_}; }
  // y = act(x W^T + bias [+ residual]): the split-K kernel where it applies
  // (few rows; CudaEngineOptions::splitk_gemms), cuBLASLt elsewhere.
  Status Linear(const void* x, int rows, int in, const void* w, const void* bias, int out,
                cuda::Epilogue epilogue, const void* residual, void* y, cudaStream_t stream);
  Status CopyBack(const RaggedBatch& batch, bool hidden_state, BatchOutputs* out);

  std::shared_ptr<const Model> model_;
  CudaEngineOptions options_;
  GpuInfo gpu_;
  int sm_count_ = 0;
  // CudaEngineOptions::overlap_kernel_launches, on a GPU that has them.
  bool overlap_launch_ = false;
  cudaStream_t stream_ = nullptr;
  cuda::DeviceWeights weights_;
  cuda::LtGemm gemm_;
  cuda::Epilogue ffn_epilogue_ = cuda::Epilogue::kBias;
  // CudaEngineOptions::approximate_erf_gelu took effect.
  bool ErfGeluAsTanh() const {
    return ffn_epilogue_ == cuda::Epilogue::kBiasGeluTanh &&
           model_->config.hidden_act == HiddenAct::kGelu;
  }

  mutable std::mutex mu_;  // Run shares the pool and the stream
  int capacity_tokens_ = 0;
  DeviceBuffer pool_;
  PinnedBuffer host_ints_, host_floats_;
  Workspace ws_{};
  // Graphs hold the pool's addresses: they are dropped when it moves, and a
  // capture that began before the move is discarded.
  uint64_t pool_generation_ = 0;
  bool graphs_enabled_ = true;
  uint64_t runs_ = 0;  // batches run (the first is traced)
  // The staged batch's sequences in their device order, when Stage packed
  // them into attention windows (layout_order_[k]: the batch's index of the
  // k-th); empty when they keep the batch's order.
  std::vector<int> layout_order_;
  // CopyBack's outputs in the batch's order when layout_order_ is not; kept
  // (at the size of the largest such batch) so that no batch allocates it.
  std::vector<float> host_reordered_;
  std::string graphs_off_reason_;  // why a capture failed, for device()
  std::map<Shape, CachedGraph> graphs_;
  uint64_t use_clock_ = 0;
  std::map<std::string, OpProfile> profile_;
  // Profiling engines: the timer stamps of the forward in flight, and each
  // shape's operations as its eager forward enqueued them (its graph replays
  // the same).
  DeviceBuffer profile_stamps_;
  std::map<Shape, std::vector<ProfiledOp>> profiled_ops_;

  // The capture thread (started with the first capture) and its queue of
  // shapes, guarded by mu_.
  cudaStream_t capture_stream_ = nullptr;
  std::thread capture_thread_;
  std::condition_variable capture_wanted_, captures_done_;
  std::deque<Shape> capture_queue_;
  std::set<Shape> capture_pending_;  // queued or being captured
  bool capture_running_ = false;
  bool stopping_ = false;
};

template <typename Op>
Status CudaEngine::Timed(OpTrace* trace, const char* name, double flops, cudaStream_t stream,
                         Op&& op) {
  RETURN_IF_ERROR(op());
  if (!trace) return Status::Ok();
  trace->ops.push_back({name, flops});
  const size_t slot = trace->ops.size() + 1;
  if (slot >= trace->capacity)
    return Internal("cuda engine: a profiled forward has more than " +
                    std::to_string(trace->capacity - 2) + " operations");
  return cuda::StampTime(trace->stamps + slot, stream);
}

Status CudaEngine::AddToProfile(const Shape& shape) {
  const std::vector<ProfiledOp>& ops = profiled_ops_.at(shape);
  std::vector<uint64_t> stamps(ops.size() + 2);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(stamps.data(), profile_stamps_.get(),
                                       stamps.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                       stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  // Each interval holds one stamp's cost besides its operation.
  const double stamp_ns = static_cast<double>(stamps[1] - stamps[0]);
  for (size_t i = 0; i < ops.size(); ++i) {
    OpProfile& p = profile_[ops[i].name];
    p.name = ops[i].name;
    ++p.calls;
    p.seconds += (static_cast<double>(stamps[i + 2] - stamps[i + 1]) - stamp_ns) * 1e-9;
    p.flops += ops[i].flops;
  }
  return Status::Ok();
}

CudaEngine::~CudaEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  capture_wanted_.notify_all();
  if (capture_thread_.joinable()) capture_thread_.join();
  cudaSetDevice(gpu_.index);
  graphs_.clear();
  for (cudaStream_t s : {stream_, capture_stream_}) {
    if (!s) continue;
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
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
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, gpu_.index));
  overlap_launch_ = options_.overlap_kernel_launches && gpu_.compute_capability >= 90;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking));
  RETURN_IF_ERROR(
      gemm_.Init(options_.precision, kGemmWorkspaceBytes, gpu_.name, options_.time_gemms));
  TraceStartup("cuda engine: cuBLASLt handle created");
  ASSIGN_OR_RETURN(weights_, cuda::UploadWeights(*model_, options_.precision, stream_));
  TraceStartup("cuda engine: weights uploaded");
  ffn_epilogue_ = FfnEpilogue(c, options_);
  // A dummy sequence can be 64 tokens long; its positions must exist.
  graphs_enabled_ = c.max_position_embeddings >= cuda::kLenBucket && options_.cuda_graphs;
  if (options_.profile) {
    // Two opening stamps, then one per operation: at most ten per layer
    // (Encoder), the embedding and the head.
    const size_t slots = 4 + 10 * static_cast<size_t>(c.num_layers);
    RETURN_IF_ERROR(profile_stamps_.Allocate(slots * sizeof(uint64_t), "profile timer stamps",
                                             "run without profiling"));
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
  return {t * h * e, t * h * e, t * 3 * h * e,         t * h * e,      t * c.intermediate_size * e,
          t * h * 4, t * h * 4, t * LogitsWidth() * 4, cuda::IntCapacity(t) * 4};
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
  // Free the old pool first: the two need not fit side by side. The graphs
  // point into it.
  graphs_.clear();
  ++pool_generation_;
  capacity_tokens_ = 0;
  RETURN_IF_ERROR(pool_.Allocate(total, "activations of " + std::to_string(t) + " tokens", hint));
  std::vector<char*> p;
  char* next = static_cast<char*>(pool_.get());
  for (size_t r : regions) {
    p.push_back(next);
    next += AlignUp(r);
  }
  const size_t int_count = cuda::IntCapacity(t);
  // hidden states, pooled rows and logits can all come back from one batch.
  const size_t float_count = (regions[5] + regions[6] + regions[7]) / sizeof(float);
  RETURN_IF_ERROR(host_ints_.Allocate(int_count * sizeof(int32_t), "batch ids"));
  RETURN_IF_ERROR(host_floats_.Allocate(float_count * sizeof(float), "outputs"));
  ws_ = Workspace{p[0],
                  p[1],
                  p[2],
                  p[3],
                  p[4],
                  reinterpret_cast<float*>(p[5]),
                  reinterpret_cast<float*>(p[6]),
                  reinterpret_cast<float*>(p[7]),
                  reinterpret_cast<int32_t*>(p[8]),
                  static_cast<int32_t*>(host_ints_.get()),
                  static_cast<float*>(host_floats_.get())};
  capacity_tokens_ = t;
  return Status::Ok();
}

Shape CudaEngine::ShapeFor(const RaggedBatch& batch, const RunOptions& options) const {
  const int t = batch.num_tokens(), n = batch.num_seqs();
  // From cu_seqlens rather than batch.max_len: the attention grid rests on it.
  int max_len = 0;
  for (int s = 0; s < n; ++s)
    max_len = std::max(max_len, batch.cu_seqlens[s + 1] - batch.cu_seqlens[s]);
  const Shape exact{t, n, max_len, options.last_hidden_state};
  if (!graphs_enabled_) return exact;
  const Shape padded = cuda::PaddedShape(t, n, max_len, options.last_hidden_state);
  // A fixed reservation is never grown for padding.
  if (options_.max_batch_tokens > 0 && padded.tokens > capacity_tokens_) return exact;
  return padded;
}

// Staged in pinned memory so the copies are true async DMAs on our stream.
Status CudaEngine::Stage(const RaggedBatch& batch, const Shape& shape) {
  const int t = batch.num_tokens(), n = batch.num_seqs();
  const int tokens = shape.tokens;
  const BatchInts ints = cuda::LayOutInts(ws_.host_ints, shape);
  const int32_t* cu = batch.cu_seqlens.data();
  // Attention windows (batch_shape.h): the sequences are reordered to fill
  // them when some window then holds more than one, and there are more
  // (sequence, head) units than multiprocessors: with fewer, each unit has a
  // multiprocessor already, and windows would only make some units longer
  // (H200: 8 x 8..32 tokens 2.5% slower packed, 128 x 8..32 16% faster,
  // bench/RESULTS.md 2026-12-01). CopyBack restores the order.
  const bool windows = AttentionArgsFor(shape, ws_).row_bounds != nullptr;
  cuda::WindowPacking packing;
  layout_order_.clear();
  if (windows) {
    std::vector<int> lengths(n);
    for (int s = 0; s < n; ++s) lengths[s] = cu[s + 1] - cu[s];
    packing = cuda::PackWindows(lengths);
    if (packing.Packs() && static_cast<long>(n) * model_->config.num_heads > sm_count_)
      layout_order_ = packing.order;
    else
      packing.window_seqs.assign(n, 1);  // a window per sequence, in the batch's order
  }
  if (layout_order_.empty()) {
    std::memcpy(ints.ids, batch.input_ids.data(), t * sizeof(int32_t));
    std::memcpy(ints.types, batch.token_type_ids.data(), t * sizeof(int32_t));
    std::memcpy(ints.cu, cu, (n + 1) * sizeof(int32_t));
  } else {
    ints.cu[0] = 0;
    for (int k = 0; k < n; ++k) {
      const int s = layout_order_[k], len = cu[s + 1] - cu[s];
      std::memcpy(ints.ids + ints.cu[k], batch.input_ids.data() + cu[s], len * sizeof(int32_t));
      std::memcpy(ints.types + ints.cu[k], batch.token_type_ids.data() + cu[s],
                  len * sizeof(int32_t));
      ints.cu[k + 1] = ints.cu[k] + len;
    }
  }
  // Dummy tokens: id 0 and type 0 exist in every vocabulary; their rows are
  // never read back.
  std::fill(ints.ids + t, ints.ids + tokens, 0);
  std::fill(ints.types + t, ints.types + tokens, 0);
  cuda::LayOutDummies(shape, n, ints.cu);
  if (windows)
    cuda::LayOutWindows(ints.cu, shape.seqs, packing.window_seqs, ints.by_length, ints.row_bounds);
  else
    cuda::LongestFirst(ints.cu, shape.seqs, ints.by_length);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws_.ints, ws_.host_ints,
                                       cuda::IntCount(shape) * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream_));
  return Status::Ok();
}

Status CudaEngine::Forward(const Shape& shape) {
  if (auto it = graphs_.find(shape); it != graphs_.end()) {
    it->second.last_use = ++use_clock_;
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second.exec.get(), stream_));
    return Status::Ok();
  }
  // Eagerly, which also builds the shape's GEMM plans before the capture
  // needs them.
  RETURN_IF_ERROR(Compute(shape, ws_, stream_, options_.profile ? &profiled_ops_[shape] : nullptr));
  if (graphs_enabled_ && capture_pending_.insert(shape).second) {
    capture_queue_.push_back(shape);
    if (!capture_thread_.joinable()) capture_thread_ = std::thread([this] { CaptureLoop(); });
    capture_wanted_.notify_one();
  }
  return Status::Ok();
}

void CudaEngine::CaptureLoop() {
  cudaSetDevice(gpu_.index);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    capture_wanted_.wait(lock, [&] { return stopping_ || !capture_queue_.empty(); });
    if (stopping_) return;
    const Shape shape = capture_queue_.front();
    capture_queue_.pop_front();
    const Workspace ws = ws_;
    const uint64_t generation = pool_generation_;
    capture_running_ = true;
    lock.unlock();
    StatusOr<GraphExec> exec = Capture(shape, ws);
    lock.lock();
    capture_running_ = false;
    capture_pending_.erase(shape);
    if (!exec.ok()) {
      // Graphs are an optimization: the engine keeps serving without them,
      // and device() says why.
      graphs_enabled_ = false;
      graphs_off_reason_ = exec.status().ToString();
      graphs_.clear();
      capture_queue_.clear();
      capture_pending_.clear();
    } else if (generation == pool_generation_ && graphs_enabled_) {
      if (graphs_.size() >= kMaxGraphs) {
        auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](auto& a, auto& b) {
          return a.second.last_use < b.second.last_use;
        });
        graphs_.erase(oldest);
      }
      CachedGraph& cached = graphs_[shape];
      cached.exec = std::move(*exec);
      cached.last_use = ++use_clock_;
    }
    if (capture_queue_.empty()) captures_done_.notify_all();
  }
}

StatusOr<GraphExec> CudaEngine::Capture(const Shape& shape, const Workspace& ws) {
  // Thread-local mode: the request thread's eager launches on stream_ go on
  // while this thread captures.
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
  const Status computed = Compute(shape, ws, capture_stream_);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(capture_stream_, &graph);
  if (!computed.ok() || ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    RETURN_IF_ERROR(computed);
    CUDA_RETURN_IF_ERROR(ended);
  }
  cudaGraphExec_t raw = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&raw, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_RETURN_IF_ERROR(instantiated);
  GraphExec exec(raw);
  // Uploaded here, so that its first replay on the request path does not.
  CUDA_RETURN_IF_ERROR(cudaGraphUpload(exec.get(), capture_stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(capture_stream_));
  return exec;
}

Status CudaEngine::Compute(const Shape& shape, const Workspace& ws, cudaStream_t stream,
                           std::vector<ProfiledOp>* profiled) {
  std::optional<OpTrace> trace;
  if (options_.profile) {
    trace = OpTrace{static_cast<uint64_t*>(profile_stamps_.get()),
                    profile_stamps_.size() / sizeof(uint64_t),
                    {}};
    RETURN_IF_ERROR(cuda::StampTime(trace->stamps, stream));
    RETURN_IF_ERROR(cuda::StampTime(trace->stamps + 1, stream));
  }
  OpTrace* const traced = trace ? &*trace : nullptr;
  RETURN_IF_ERROR(Encoder(shape, ws, stream, traced));
  RETURN_IF_ERROR(Timed(traced, "head", 0, stream, [&] { return HeadKernels(shape, ws, stream); }));
  if (trace && profiled) *profiled = std::move(trace->ops);
  return Status::Ok();
}

bool CudaEngine::FirstTokensOnly(const Shape& shape) const {
  return OutputsReadOnlyFirstTokens(model_->config, weights_.pooler_w != nullptr,
                                    shape.hidden_state);
}

Status CudaEngine::Linear(const void* x, int rows, int in, const void* w, const void* bias, int out,
                          cuda::Epilogue epilogue, const void* residual, void* y,
                          cudaStream_t stream) {
  if (options_.splitk_gemms &&
      cuda::SplitKLinearApplies(options_.precision, gpu_.compute_capability, rows, in, out))
    return cuda::SplitKLinear(
        options_.precision, {x, rows, in, w, bias, out, epilogue, residual, y, sm_count_},
        KernelStream(stream));
  return gemm_.Linear(x, rows, in, w, bias, out, epilogue, residual, y, stream);
}

cuda::AttentionArgs CudaEngine::AttentionArgsFor(const Shape& shape, const Workspace& ws) const {
  const ModelConfig& c = model_->config;
  const BatchInts ints = cuda::LayOutInts(ws.ints, shape);
  cuda::AttentionArgs a{ws.qkv,        ints.by_length,          shape.seqs,
                        shape.max_len, c.hidden_size,           c.num_heads,
                        ws.ctx,        gpu_.compute_capability, sm_count_};
  a.tokens = shape.tokens;
  a.allow_tma = options_.tma_attention;
  if (options_.attention_windows && cuda::AttentionTakesWindows(options_.precision, a))
    a.row_bounds = ints.row_bounds;
  return a;
}

Status CudaEngine::Encoder(const Shape& shape, const Workspace& ws, cudaStream_t stream,
                           OpTrace* trace) {
  const ModelConfig& c = model_->config;
  const Precision p = options_.precision;
  const int t = shape.tokens, n = shape.seqs, h = c.hidden_size;
  const int inter = c.intermediate_size;
  const BatchInts ints = cuda::LayOutInts(ws.ints, shape);
  const cuda::Stream kernels = KernelStream(stream);
  RETURN_IF_ERROR(Timed(trace, "embedding+layernorm", 0, stream, [&] {
    return cuda::EmbedLayerNorm(
        p,
        {ints.ids, ints.types, ints.cu, n, t, weights_.word, weights_.position, weights_.type,
         weights_.emb_gamma, weights_.emb_beta, h, c.layer_norm_eps, ws.x},
        kernels);
  }));
  cuda::AttentionArgs attention = AttentionArgsFor(shape, ws);

  // Useful FLOPs, for the profile: 2 per multiply-add; attention counts
  // QK^T and PV over every sequence's real length (a batch's lengths are
  // known only as the padded maximum here, so it is an upper bound).
  const double attention_flops = 4.0 * n * shape.max_len * static_cast<double>(shape.max_len) * h;
  const size_t elem = ElementSize();
  const bool first_tokens_only = FirstTokensOnly(shape);
  for (const cuda::DeviceLayer& l : weights_.layers) {
    // In the last layer, a head that reads only each sequence's first token
    // needs only those rows after the QKV GEMM, in rows 0..n-1: attention
    // for the first queries alone, three quarters of the layer's GEMM work
    // and the LayerNorms shrink from t rows to n.
    const bool compact = first_tokens_only && &l == &weights_.layers.back();
    const int rows = compact ? n : t;
    const double gemm = 2.0 * rows * h;
    // See kPrefetchMaxTokens.
    attention.prefetch = {};
    if (t <= kPrefetchMaxTokens) {
      attention.prefetch.Add(l.attn_out_w, size_t{1} * h * h * elem);
      attention.prefetch.Add(l.ffn_in_w, size_t{1} * inter * h * elem);
      attention.prefetch.Add(l.ffn_out_w, size_t{1} * h * inter * elem);
    }
    RETURN_IF_ERROR(Timed(trace, "gemm qkv", 2.0 * t * h * 3 * h, stream, [&] {
      return Linear(ws.x, t, h, l.qkv_w, l.qkv_b, 3 * h, cuda::Epilogue::kBias, nullptr, ws.qkv,
                    stream);
    }));
    // The attention output GEMM reads `context` and the residual `skip`
    // and writes `sum`; compact, they are the first rows alone: attention's
    // for the first queries (or gathered from all of them) in tmp, and x's
    // gathered into qkv, free once attention has read it.
    void *context = ws.ctx, *sum = ws.tmp;
    const void* skip = ws.x;
    if (compact && options_.first_query_attention) {
      RETURN_IF_ERROR(Timed(trace, "attention", 4.0 * n * shape.max_len * h, stream, [&] {
        return cuda::FirstQueryAttention(
            p, {ws.qkv, ints.cu, n, shape.max_len, h, c.num_heads, ws.tmp, attention.prefetch},
            kernels);
      }));
    } else {
      RETURN_IF_ERROR(Timed(trace, "attention", attention_flops, stream,
                            [&] { return cuda::Attention(p, attention, kernels); }));
      if (compact)
        RETURN_IF_ERROR(Timed(trace, "gather first tokens", 0, stream, [&] {
          return cuda::GatherFirstTokens(p, ws.ctx, ints.cu, n, h, ws.tmp, kernels);
        }));
    }
    if (compact) {
      RETURN_IF_ERROR(Timed(trace, "gather first tokens", 0, stream, [&] {
        return cuda::GatherFirstTokens(p, ws.x, ints.cu, n, h, ws.qkv, kernels);
      }));
      context = ws.tmp, skip = ws.qkv, sum = ws.ctx;
    }
    // The residual enters through the GEMM's C operand (beta = 1).
    RETURN_IF_ERROR(Timed(trace, "gemm attn_out", gemm * h, stream, [&] {
      return Linear(context, rows, h, l.attn_out_w, l.attn_out_b, h, cuda::Epilogue::kBias, skip,
                    sum, stream);
    }));
    RETURN_IF_ERROR(Timed(trace, "layernorm", 0, stream, [&] {
      return cuda::LayerNorm(p, sum, ws.x, rows, h, l.attn_gamma, l.attn_beta, c.layer_norm_eps,
                             kernels);
    }));
    RETURN_IF_ERROR(Timed(trace, "gemm ffn_in", gemm * inter, stream, [&] {
      return Linear(ws.x, rows, h, l.ffn_in_w, l.ffn_in_b, inter, ffn_epilogue_, nullptr, ws.inter,
                    stream);
    }));
    if (ffn_epilogue_ == cuda::Epilogue::kBias)
      RETURN_IF_ERROR(Timed(trace, "activation", 0, stream, [&] {
        return cuda::ActivationInPlace(p, c.hidden_act, ws.inter,
                                       static_cast<size_t>(rows) * inter, kernels);
      }));
    RETURN_IF_ERROR(Timed(trace, "gemm ffn_out", gemm * inter, stream, [&] {
      return Linear(ws.inter, rows, inter, l.ffn_out_w, l.ffn_out_b, h, cuda::Epilogue::kBias, ws.x,
                    ws.tmp, stream);
    }));
    RETURN_IF_ERROR(Timed(trace, "layernorm", 0, stream, [&] {
      return cuda::LayerNorm(p, ws.tmp, ws.x, rows, h, l.ffn_gamma, l.ffn_beta, c.layer_norm_eps,
                             kernels);
    }));
  }
  return Status::Ok();
}

Status CudaEngine::HeadKernels(const Shape& shape, const Workspace& ws, cudaStream_t stream) {
  const ModelConfig& c = model_->config;
  const Precision p = options_.precision;
  const int t = shape.tokens, n = shape.seqs, h = c.hidden_size;
  const int32_t* cu = cuda::LayOutInts(ws.ints, shape).cu;
  const cuda::Stream kernels = KernelStream(stream);
  // Each sequence's first token: rows 0..n-1 of x already when the encoder
  // kept only those.
  const bool first_tokens_only = FirstTokensOnly(shape);
  if (weights_.pooler_w) {
    // ctx and tmp are free once the encoder is done.
    const void* first = ws.x;
    if (!first_tokens_only) {
      RETURN_IF_ERROR(cuda::GatherFirstTokens(p, ws.x, cu, n, h, ws.ctx, kernels));
      first = ws.ctx;
    }
    RETURN_IF_ERROR(Linear(first, n, h, weights_.pooler_w, weights_.pooler_b, h,
                           cuda::Epilogue::kBias, nullptr, ws.tmp, stream));
    RETURN_IF_ERROR(
        cuda::TanhToFloat(p, ws.tmp, ws.pooled_f32, static_cast<size_t>(n) * h, kernels));
  }
  const int labels = weights_.classifier_out;
  switch (c.head) {
    case HeadKind::kBase:
      break;
    case HeadKind::kSequenceClassification:
      RETURN_IF_ERROR(cuda::SmallLinear(Precision::kFp32, ws.pooled_f32, n, h,
                                        weights_.classifier_w, weights_.classifier_b, labels,
                                        ws.logits_f32, kernels));
      break;
    case HeadKind::kTokenClassification:
    case HeadKind::kQuestionAnswering:
      RETURN_IF_ERROR(cuda::SmallLinear(p, ws.x, t, h, weights_.classifier_w, weights_.classifier_b,
                                        labels, ws.logits_f32, kernels));
      break;
    case HeadKind::kSentenceEmbedding:
      if (first_tokens_only)  // CLS pooling of the compacted rows
        RETURN_IF_ERROR(cuda::ConvertToFloat(p, ws.x, ws.pooled_f32, static_cast<size_t>(n) * h,
                                             kernels));
      else
        RETURN_IF_ERROR(
            cuda::PoolSequences(p, ws.x, cu, n, h, c.pooling, ws.pooled_f32, kernels));
      if (c.normalize) RETURN_IF_ERROR(cuda::L2NormalizeRows(ws.pooled_f32, n, h, kernels));
      break;
  }
  if (shape.hidden_state)
    RETURN_IF_ERROR(
        cuda::ConvertToFloat(p, ws.x, ws.hidden_f32, static_cast<size_t>(t) * h, kernels));
  return Status::Ok();
}

std::vector<Pending> CudaEngine::Outputs(bool hidden_state) const {
  const ModelConfig& c = model_->config;
  const int h = c.hidden_size, labels = weights_.classifier_out;
  std::vector<Pending> pending;
  switch (c.head) {
    case HeadKind::kBase:
      if (weights_.pooler_w) pending.push_back({"pooler_output", false, h, ws_.pooled_f32});
      break;
    case HeadKind::kSequenceClassification:
      pending.push_back({"logits", false, labels, ws_.logits_f32});
      break;
    case HeadKind::kTokenClassification:
    case HeadKind::kQuestionAnswering:
      pending.push_back({"logits", true, labels, ws_.logits_f32});
      break;
    case HeadKind::kSentenceEmbedding:
      pending.push_back({"embedding", false, h, ws_.pooled_f32});
      break;
  }
  if (hidden_state) pending.push_back({"last_hidden_state", true, h, ws_.hidden_f32});
  return pending;
}

// Only the real rows come back: the dummy sequences follow the real ones.
Status CudaEngine::CopyBack(const RaggedBatch& batch, bool hidden_state, BatchOutputs* out) {
  const std::vector<Pending> pending = Outputs(hidden_state);
  std::vector<const float*> host;
  std::vector<size_t> rows;
  float* next = ws_.host_floats;
  for (const Pending& o : pending) {
    rows.push_back(o.per_token ? batch.num_tokens() : batch.num_seqs());
    const size_t count = rows.back() * o.width;
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(next, o.device, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    host.push_back(next);
    next += count;
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  // Rows in the device's order (Stage's attention windows) go back to the
  // batch's, through host_reordered_.
  if (!layout_order_.empty()) {
    host_reordered_.resize(next - ws_.host_floats);
    float* into = host_reordered_.data();
    const int32_t* cu = batch.cu_seqlens.data();
    for (size_t i = 0; i < pending.size(); ++i) {
      const int width = pending[i].width;
      size_t device_row = 0;
      for (const int s : layout_order_) {
        const size_t count = pending[i].per_token ? cu[s + 1] - cu[s] : 1;
        const size_t row = pending[i].per_token ? cu[s] : s;
        std::copy_n(host[i] + device_row * width, count * width, into + row * width);
        device_row += count;
      }
      host[i] = into;
      into += rows[i] * width;
    }
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    const Pending& o = pending[i];
    if (model_->config.head == HeadKind::kQuestionAnswering && o.name == "logits")
      AppendQuestionAnsweringOutputs(host[i], rows[i], out);
    else
      out->outputs.push_back(MakeOutput(o.name, o.per_token, o.width, host[i], rows[i]));
  }
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
  RETURN_IF_ERROR(Reserve(shape.tokens));
  RETURN_IF_ERROR(Stage(batch, shape));
  if (first) TraceStartup("cuda engine: first batch staged");
  RETURN_IF_ERROR(Forward(shape));
  if (first) TraceStartup("cuda engine: first forward enqueued");
  RETURN_IF_ERROR(CopyBack(batch, options.last_hidden_state, &out));
  if (first) TraceStartup("cuda engine: first results copied back");
  if (options_.profile) RETURN_IF_ERROR(AddToProfile(shape));
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
  CudaEngineOptions resolved = options;
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
    } else if (!covered && !resolved.time_gemms) {
      resolved.time_gemms = true;
      notice = "the plan's " + std::to_string(model->gemm_choices->size()) +
               " GEMM choices were timed for other GPUs, cuBLASLt versions or precisions, not " +
               prefix + ": re-timing each GEMM at its batch shape's first use";
    }
    if (!notice.empty() && resolved.on_notice)
      resolved.on_notice(model->source + ": " + notice +
                         "; `bertrt build --device cuda` on this GPU stores timed choices");
  }
  auto engine = std::make_unique<CudaEngine>(std::move(model), resolved, gpus[options.device]);
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

StatusOr<std::vector<GemmChoice>> TimeGemms(const ModelConfig& config,
                                            const CudaEngineOptions& options, int max_tokens,
                                            const std::function<void(int, int)>& progress) {
  ASSIGN_OR_RETURN(std::vector<GpuInfo> gpus, ListGpus());
  if (options.device < 0 || options.device >= static_cast<int>(gpus.size()))
    return InvalidArgument("GEMM timing: GPU " + std::to_string(options.device) +
                           " does not exist");
  const GpuInfo& gpu = gpus[options.device];
  CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu.index));
  cuda::LtGemm gemm;
  RETURN_IF_ERROR(gemm.Init(options.precision, kGemmWorkspaceBytes, gpu.name, true));
  // The batch sizes the engine runs at: every token bucket up to max_tokens.
  std::vector<int> buckets;
  for (int t = cuda::kTokenBucket; t <= cuda::TokenBucket(max_tokens); t = cuda::TokenBucket(t + 1))
    buckets.push_back(t);
  const size_t m = buckets.back(), h = config.hidden_size, inter = config.intermediate_size;
  const size_t e = DTypeSize(PrecisionDType(options.precision));
  const size_t widest = std::max(3 * h, inter);
  // Operands with the GEMMs' shapes; their values do not matter to the
  // timing, but all-zero inputs would draw less power than real ones.
  cuda::DeviceBuffer x, w, bias, residual, y;
  const std::string hint = "build with a smaller --max-batch-tokens";
  RETURN_IF_ERROR(x.Allocate(m * widest * e, "GEMM timing inputs", hint));
  RETURN_IF_ERROR(w.Allocate(widest * std::max(h, inter) * e, "GEMM timing weights", hint));
  RETURN_IF_ERROR(bias.Allocate(widest * e, "GEMM timing bias", hint));
  RETURN_IF_ERROR(residual.Allocate(m * h * e, "GEMM timing residual", hint));
  RETURN_IF_ERROR(y.Allocate(m * widest * e, "GEMM timing outputs", hint));
  for (cuda::DeviceBuffer* b : {&x, &w, &bias, &residual})
    CUDA_RETURN_IF_ERROR(cudaMemset(b->get(), 0x2f, b->size()));
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const cuda::Epilogue ffn = FfnEpilogue(config, options);
  // The encoder's four GEMMs, as CudaEngine::Encoder runs them: out, in,
  // epilogue, residual.
  const std::tuple<size_t, size_t, cuda::Epilogue, bool> encoder_gemms[] = {
      {3 * h, h, cuda::Epilogue::kBias, false},
      {h, h, cuda::Epilogue::kBias, true},
      {inter, h, ffn, false},
      {h, inter, cuda::Epilogue::kBias, true}};
  Status st = Status::Ok();
  for (size_t i = 0; i < buckets.size() && st.ok(); ++i) {
    for (const auto& [n, k, epilogue, with_residual] : encoder_gemms) {
      st = gemm.Linear(x.get(), buckets[i], static_cast<int>(k), w.get(), bias.get(),
                       static_cast<int>(n), epilogue, with_residual ? residual.get() : nullptr,
                       y.get(), stream);
      if (!st.ok()) break;
    }
    if (st.ok()) st = cuda::CudaStatus(cudaStreamSynchronize(stream), "GEMM timing");
    if (progress) progress(static_cast<int>(i) + 1, static_cast<int>(buckets.size()));
  }
  cudaStreamDestroy(stream);
  RETURN_IF_ERROR(st);
  ASSIGN_OR_RETURN(const std::string prefix, cuda::GemmChoicePrefix(gpu.name, options.precision));
  return cuda::GemmChoicesWithPrefix(prefix);
}

}  // namespace bertrt

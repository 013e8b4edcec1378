#include "backends/cuda/engine/graph_cache.h"

#include <algorithm>
#include <utility>

#include "backends/cuda/util/cuda_check.h"
#include "core/thread_name.h"

namespace bertrt::cuda {

GraphCache::GraphCache(int device, bool enabled, Forward forward)
    : device_(device), forward_(std::move(forward)), enabled_(enabled) {}

GraphCache::~GraphCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wanted_.notify_all();
  if (thread_.joinable()) thread_.join();
  cudaSetDevice(device_);
  graphs_.clear();
  if (capture_stream_) {
    cudaStreamSynchronize(capture_stream_);
    cudaStreamDestroy(capture_stream_);
  }
}

Status GraphCache::Init() {
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking));
  return Status::Ok();
}

bool GraphCache::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_;
}

std::string GraphCache::off_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return off_reason_;
}

StatusOr<bool> GraphCache::Launch(const Shape& shape, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(shape);
  if (it == graphs_.end()) return false;
  it->second.last_use = ++use_clock_;
  CUDA_RETURN_IF_ERROR(cudaGraphLaunch(it->second.exec.get(), stream));
  return true;
}

void GraphCache::Request(const Shape& shape, const Workspace& ws, uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled_ || graphs_.count(shape) || !pending_.insert(shape).second) return;
  queue_.push_back({shape, ws, generation});
  if (!thread_.joinable())
    thread_ = std::thread([this] {
      NameThisThread("graph-capture");
      Loop();
    });
  wanted_.notify_one();
}

void GraphCache::Invalidate(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  generation_ = generation;
  graphs_.clear();
}

void GraphCache::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return queue_.empty() && !running_; });
}

void GraphCache::Loop() {
  cudaSetDevice(device_);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wanted_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const Wanted w = queue_.front();
    queue_.pop_front();
    running_ = true;
    // A capture of a pool that has moved since the request would be
    // dropped: it is skipped (the shape's next eager run asks again).
    const bool current = w.generation == generation_;
    lock.unlock();
    StatusOr<Exec> exec = current ? Capture(w.shape, w.ws) : Exec();
    lock.lock();
    running_ = false;
    pending_.erase(w.shape);
    if (!exec.ok()) {
      // Graphs are an optimization: the engine keeps serving without them,
      // and its device() says why.
      enabled_ = false;
      off_reason_ = exec.status().ToString();
      graphs_.clear();
      queue_.clear();
      pending_.clear();
    } else if (*exec && w.generation == generation_ && enabled_) {
      if (graphs_.size() >= kMaxGraphs) {
        auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](auto& a, auto& b) {
          return a.second.last_use < b.second.last_use;
        });
        graphs_.erase(oldest);
      }
      Cached& cached = graphs_[w.shape];
      cached.exec = std::move(*exec);
      cached.last_use = ++use_clock_;
    }
    if (queue_.empty()) done_.notify_all();
  }
}

StatusOr<GraphCache::Exec> GraphCache::Capture(const Shape& shape, const Workspace& ws) {
  // Thread-local mode: the request thread's eager launches on its stream go
  // on while this thread captures.
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
  const Status computed = forward_(shape, ws, capture_stream_);
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
  Exec exec(raw);
  // Uploaded here, so that its first replay on the request path does not.
  CUDA_RETURN_IF_ERROR(cudaGraphUpload(exec.get(), capture_stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(capture_stream_));
  return exec;
}

}  // namespace bertrt::cuda

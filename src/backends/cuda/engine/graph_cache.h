// CUDA graphs of the engine's forward, one per batch shape (bucket),
// captured on a thread of their own, off the request path: a shape's batches
// run eagerly until its graph is ready (a capture takes milliseconds, and on
// the request path it set a server's p99), then replay it. The graphs hold
// the activation pool's addresses: they are dropped when it moves, and a
// capture that began before the move is discarded.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "backends/cuda/engine/activation_pool.h"
#include "backends/cuda/engine/batch_shape.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

class GraphCache {
 public:
  // Enqueues the forward of a shape on a stream, kernels only (the capture).
  using Forward = std::function<Status(const Shape&, const Workspace&, cudaStream_t)>;
  // Graphs on GPU `device`; `enabled` false keeps it empty.
  GraphCache(int device, bool enabled, Forward forward);
  ~GraphCache();
  Status Init();

  // Whether graphs are in use (a failed capture turns them off for good, and
  // off_reason() says why).
  bool enabled() const;
  std::string off_reason() const;
  // How many graphs are kept, least recently used dropped first: a server's
  // batches vary in three bucketed dimensions, and with 16 the half-load p99
  // on the H200 was set by re-running and re-capturing evicted shapes; a
  // graph costs host memory only.
  static constexpr size_t kMaxGraphs = 256;

  // Launches `shape`'s graph on `stream`, if there is one: false when not.
  StatusOr<bool> Launch(const Shape& shape, cudaStream_t stream);
  // Has `shape`'s graph captured over `ws` of pool `generation`, unless one is
  // already kept or on its way.
  void Request(const Shape& shape, const Workspace& ws, uint64_t generation);
  // The pool moved to `generation`: drops every graph.
  void Invalidate(uint64_t generation);
  // Blocks until no capture is queued or running.
  void WaitIdle();

 private:
  struct ExecDeleter {
    void operator()(cudaGraphExec_t exec) const { cudaGraphExecDestroy(exec); }
  };
  using Exec = std::unique_ptr<CUgraphExec_st, ExecDeleter>;
  struct Cached {
    Exec exec;
    uint64_t last_use = 0;
  };
  struct Wanted {
    Shape shape;
    Workspace ws;
    uint64_t generation;
  };
  void Loop();
  // One capture, with instantiation and upload, on capture_stream_, unlocked.
  StatusOr<Exec> Capture(const Shape& shape, const Workspace& ws);

  const int device_;
  const Forward forward_;
  mutable std::mutex mu_;
  bool enabled_;
  std::string off_reason_;
  uint64_t generation_ = 0;
  std::map<Shape, Cached> graphs_;
  uint64_t use_clock_ = 0;
  cudaStream_t capture_stream_ = nullptr;
  // The capture thread (started with the first request) and its queue.
  std::thread thread_;
  std::condition_variable wanted_, done_;
  std::deque<Wanted> queue_;
  std::set<Shape> pending_;  // queued or being captured
  bool running_ = false;
  bool stopping_ = false;
};

}  // namespace bertrt::cuda

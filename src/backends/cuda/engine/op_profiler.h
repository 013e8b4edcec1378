// CudaEngineOptions::profile: the time of each operation of a forward, read
// inside the CUDA graph that serves it. A one-thread kernel stamps the GPU's
// global timer after each operation; two stamps open the forward, and the
// time between them (one stamp's own cost) is taken out of every interval.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/util/device_memory.h"
#include "bertrt/engine.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// An operation of a profiled forward.
struct ProfiledOp {
  const char* name;
  double flops;
};

// A profiled forward as it is enqueued: its operations in order, and where
// the stamps go on the device (the i-th operation's in slot i + 2).
class OpTrace {
 public:
  OpTrace(uint64_t* stamps, size_t capacity) : stamps_(stamps), capacity_(capacity) {}
  // The two opening stamps.
  Status Open(cudaStream_t stream);
  // Records that operation `name` was just enqueued, and stamps after it.
  Status After(const char* name, double flops, cudaStream_t stream);
  std::vector<ProfiledOp> TakeOps() { return std::move(ops_); }

 private:
  uint64_t* stamps_;
  size_t capacity_;  // slots
  std::vector<ProfiledOp> ops_;
};

class OpProfiler {
 public:
  // Room for the stamps of forwards of up to `max_ops` operations.
  Status Init(size_t max_ops);
  // A trace for one forward, writing to this profiler's stamps.
  OpTrace Trace() {
    return OpTrace(static_cast<uint64_t*>(stamps_.get()), stamps_.size() / sizeof(uint64_t));
  }
  // The operations `shape`'s eager forward enqueued (its graph replays the same).
  void Remember(const Shape& shape, std::vector<ProfiledOp> ops) { ops_[shape] = std::move(ops); }
  // Adds the stamps of the forward of `shape` just run on `stream` to the totals.
  Status Accumulate(const Shape& shape, cudaStream_t stream);
  std::vector<OpProfile> Totals() const;

 private:
  DeviceBuffer stamps_;
  std::map<Shape, std::vector<ProfiledOp>> ops_;
  std::map<std::string, OpProfile> totals_;
};

}  // namespace bertrt::cuda

// What accelerators this process can use. Plain C++: callers never include CUDA.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "bertrt/status.h"

namespace bertrt {

struct GpuInfo {
  int index = 0;
  std::string name;
  int compute_capability = 0;  // e.g. 90 for sm_90
  size_t total_memory_bytes = 0;
};

// Whether this binary was built with the CUDA backend.
bool BuiltWithCuda();

// The GPUs visible to this process, read once; FailedPrecondition saying why
// when there are none (no CUDA in this build, no driver, no device).
StatusOr<std::vector<GpuInfo>> ListGpus();

// Bytes of GPU `device`'s memory in use by every process (total - free), for
// leak checks and metrics.
StatusOr<size_t> GpuMemoryInUse(int device);

// Creates the CUDA contexts of `devices` (every visible GPU when empty) on a
// thread of its own, and opens cuBLASLt on another; once both are done, makes
// cuBLASLt's first heuristic query on each (it loads the library's tables).
// These are the slowest steps of starting a CUDA engine; begun before the
// model is read, they overlap with the reading and with the weight upload.
// Joins in the destructor. Without CUDA or a GPU it does nothing (engine
// creation reports that).
class GpuContextWarmup {
 public:
  explicit GpuContextWarmup(std::vector<int> devices = {});
  ~GpuContextWarmup();
  GpuContextWarmup(const GpuContextWarmup&) = delete;
  GpuContextWarmup& operator=(const GpuContextWarmup&) = delete;

 private:
  std::thread context_thread_, library_thread_;
};

}  // namespace bertrt

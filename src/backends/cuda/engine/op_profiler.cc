#include "backends/cuda/engine/op_profiler.h"

#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/util/cuda_check.h"

namespace bertrt::cuda {

Status OpTrace::Open(cudaStream_t stream) {
  RETURN_IF_ERROR(StampTime(stamps_, stream));
  return StampTime(stamps_ + 1, stream);
}

Status OpTrace::After(const char* name, double flops, cudaStream_t stream) {
  ops_.push_back({name, flops});
  const size_t slot = ops_.size() + 1;
  if (slot >= capacity_)
    return Internal("cuda engine: a profiled forward has more than " +
                    std::to_string(capacity_ - 2) + " operations");
  return StampTime(stamps_ + slot, stream);
}

Status OpProfiler::Init(size_t max_ops) {
  return stamps_.Allocate((max_ops + 2) * sizeof(uint64_t), "profile timer stamps",
                          "run without profiling");
}

Status OpProfiler::Accumulate(const Shape& shape, cudaStream_t stream) {
  const std::vector<ProfiledOp>& ops = ops_.at(shape);
  std::vector<uint64_t> stamps(ops.size() + 2);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(stamps.data(), stamps_.get(),
                                       stamps.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                       stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  // Each interval holds one stamp's cost besides its operation.
  const double stamp_ns = static_cast<double>(stamps[1] - stamps[0]);
  for (size_t i = 0; i < ops.size(); ++i) {
    OpProfile& p = totals_[ops[i].name];
    p.name = ops[i].name;
    ++p.calls;
    p.seconds += (static_cast<double>(stamps[i + 2] - stamps[i + 1]) - stamp_ns) * 1e-9;
    p.flops += ops[i].flops;
  }
  return Status::Ok();
}

std::vector<OpProfile> OpProfiler::Totals() const {
  std::vector<OpProfile> out;
  for (const auto& [name, p] : totals_) out.push_back(p);
  return out;
}

}  // namespace bertrt::cuda

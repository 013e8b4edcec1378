#include "serving/model_statistics.h"

#include <chrono>
#include <cmath>

namespace bertrt::serving {

namespace {

uint64_t Nanoseconds(double seconds) {
  return seconds > 0 ? static_cast<uint64_t>(std::llround(seconds * 1e9)) : 0;
}

}  // namespace

void DurationStat::Add(double seconds) {
  ++count;
  ns += Nanoseconds(seconds);
}

const char* FailureReason(StatusCode code) {
  switch (code) {
    case StatusCode::kResourceExhausted:  // the queue was full
    case StatusCode::kDeadlineExceeded:   // timed out in the queue
      return "REJECTED";
    case StatusCode::kUnavailable:  // the client went away, or the server is stopping
      return "CANCELED";
    case StatusCode::kInternal:
    case StatusCode::kDataLoss:
      return "BACKEND";
    default:
      return "OTHER";
  }
}

void Observe(ModelStatistics& s, const InferenceRecord& r) {
  s.last_inference_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  if (r.code != StatusCode::kOk) {
    s.fail.Add(r.request_seconds);
    ++s.failures[FailureReason(r.code)];
    return;
  }
  s.success.Add(r.request_seconds);
  s.queue.Add(r.queue_seconds);
  s.compute_input.Add(r.input_seconds);
  s.compute_infer.Add(r.infer_seconds);
  s.compute_output.Add(r.output_seconds);
  s.inference_count += static_cast<uint64_t>(r.sequences);
}

void VersionStatistics::Observe(const InferenceRecord& r) {
  std::lock_guard lock(mu_);
  bertrt::serving::Observe(stats_, r);
}

void VersionStatistics::ObserveExecution(int sequences, double compute_seconds) {
  std::lock_guard lock(mu_);
  bertrt::serving::ObserveExecution(stats_, sequences, compute_seconds);
}

ModelStatistics VersionStatistics::Snapshot() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ObserveExecution(ModelStatistics& s, int sequences, double compute_seconds) {
  ++s.execution_count;
  s.batches[static_cast<uint64_t>(sequences)].Add(compute_seconds);
}

}  // namespace bertrt::serving

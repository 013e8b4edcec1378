// Triton's per model version statistics, as the serving core counts them:
// every inference request on a loaded version and each engine batch it runs.
// The server answers them as Triton's statistics extension and nv_inference_*
// metrics (server/common/model_stats.h), so that tritonclient, perf_analyzer
// and dashboards made for Triton read bertrt unchanged. MetricsSink is what
// the serving core tells the server's metrics as models load and run.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bertrt/status.h"

namespace bertrt::serving {

// A count and the nanoseconds it took in all (Triton's StatisticDuration).
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(double seconds);
};

struct ModelStatistics {
  uint64_t last_inference_ms = 0;  // the last request's end, in ms since the epoch
  uint64_t inference_count = 0;    // sequences of the successful requests
  uint64_t execution_count = 0;    // engine batches
  // success, fail: requests and their time in the server, from when the model
  // took the request to its answer; queue, compute_*: successful requests'
  // time waiting for a batch, tokenizing (compute_input), in the engine
  // (compute_infer: the batches they ran in) and picking outputs.
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  // Failed requests by Triton's reason label: REJECTED (queue full or timed
  // out), CANCELED (the client went away, or a shutdown), BACKEND (the
  // engine failed), OTHER (invalid inputs).
  std::map<std::string, uint64_t> failures;
  // By batch size (sequences in an engine batch): executions and engine time.
  std::map<uint64_t, DurationStat> batches;
};

// One inference request, as it ended.
struct InferenceRecord {
  StatusCode code = StatusCode::kOk;
  int sequences = 0;
  double request_seconds = 0;  // all of it
  double queue_seconds = 0, input_seconds = 0, infer_seconds = 0, output_seconds = 0;
  // Of input_seconds, reading the request (its body parsed into inputs)
  // before tokenizing began.
  double parse_seconds = 0;
  // The batcher returned its result: queue_seconds and infer_seconds are its.
  bool computed = false;
  // Each sequence's tokens, as the request gave them to the batcher.
  std::vector<int> input_tokens;
};

// Triton's failure reason for a request that failed with `code`.
const char* FailureReason(StatusCode code);

void Observe(ModelStatistics& s, const InferenceRecord& r);
void ObserveExecution(ModelStatistics& s, int sequences, double compute_seconds);

// The statistics of one loaded model version, held by it (ServedModel) as
// Triton's are by its loaded model: a version loaded again, after an unload or
// as a changed version in poll mode, starts from zero, and requests still
// finishing on the one it replaced count there. Thread-safe.
class VersionStatistics {
 public:
  void Observe(const InferenceRecord& r);
  void ObserveExecution(int sequences, double compute_seconds);
  ModelStatistics Snapshot() const;

 private:
  mutable std::mutex mu_;
  ModelStatistics stats_;
};

// What the serving core reports as models load and run, for /metrics and
// Triton's statistics (the server's Metrics implements it). Thread-safe.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // A version's statistics, listed from its load until RemoveModelVersion.
  virtual void AddModelVersion(const std::string& model, const std::string& version,
                               std::shared_ptr<const VersionStatistics> stats) = 0;
  // The loaded version holding `stats` is gone (unloaded or replaced).
  virtual void RemoveModelVersion(const std::string& model, const std::string& version,
                                  const VersionStatistics* stats) = 0;
  // An inference request done (RequestTimer::Finish).
  virtual void ObserveInference(const std::string& model, const InferenceRecord& record) = 0;
  // One engine batch of `model` on `instance` ("cpu", "cuda:0", ...).
  virtual void ObserveBatch(const std::string& model, const std::string& instance, int sequences,
                            int tokens, double compute_seconds) = 0;
};

}  // namespace bertrt::serving

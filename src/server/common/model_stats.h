// Triton's per model version statistics: what the statistics extension
// (GET /v2/models[/{m}[/versions/{v}]]/stats, gRPC ModelStatistics) answers
// and what Triton's nv_inference_* Prometheus metrics count, so that
// tritonclient, perf_analyzer and dashboards made for Triton read bertrt
// unchanged. Metrics (metrics.h) keeps one ModelStatistics per model version.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "bertrt/status.h"

namespace bertrt::server {

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

// One $model_stat of the statistics extension's JSON.
nlohmann::json StatisticsJson(const std::string& name, const std::string& version,
                              const ModelStatistics& s);

using StatisticsByVersion = std::map<std::pair<std::string, std::string>, ModelStatistics>;

// Appends Triton's nv_inference_* counter families (Prometheus text, labels
// model and version; failures also by reason) for every model version.
void RenderTritonMetrics(const StatisticsByVersion& stats, std::string& out);

}  // namespace bertrt::server

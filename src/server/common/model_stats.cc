#include "server/common/model_stats.h"

#include <chrono>
#include <cmath>

#include "server/common/metrics.h"

namespace bertrt::server {
using nlohmann::json;

namespace {

uint64_t Nanoseconds(double seconds) {
  return seconds > 0 ? static_cast<uint64_t>(std::llround(seconds * 1e9)) : 0;
}

json Duration(const DurationStat& d) { return json{{"count", d.count}, {"ns", d.ns}}; }

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
  bertrt::server::Observe(stats_, r);
}

void VersionStatistics::ObserveExecution(int sequences, double compute_seconds) {
  std::lock_guard lock(mu_);
  bertrt::server::ObserveExecution(stats_, sequences, compute_seconds);
}

ModelStatistics VersionStatistics::Snapshot() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ObserveExecution(ModelStatistics& s, int sequences, double compute_seconds) {
  ++s.execution_count;
  s.batches[static_cast<uint64_t>(sequences)].Add(compute_seconds);
}

json StatisticsJson(const std::string& name, const std::string& version, const ModelStatistics& s) {
  json batches = json::array();
  // The engine's time for a batch covers its inputs' upload and its outputs'
  // download: all of it is compute_infer.
  for (const auto& [size, d] : s.batches)
    batches.push_back({{"batch_size", size},
                       {"compute_input", Duration({})},
                       {"compute_infer", Duration(d)},
                       {"compute_output", Duration({})}});
  return json{{"name", name},
              {"version", version},
              {"last_inference", s.last_inference_ms},
              {"inference_count", s.inference_count},
              {"execution_count", s.execution_count},
              {"inference_stats",
               {{"success", Duration(s.success)},
                {"fail", Duration(s.fail)},
                {"queue", Duration(s.queue)},
                {"compute_input", Duration(s.compute_input)},
                {"compute_infer", Duration(s.compute_infer)},
                {"compute_output", Duration(s.compute_output)},
                {"cache_hit", Duration({})},
                {"cache_miss", Duration({})}}},
              {"response_stats", json::object()},
              {"batch_stats", std::move(batches)},
              {"memory_usage", json::array()}};
}

void RenderTritonMetrics(const StatisticsByVersion& stats, std::string& out) {
  auto labels = [](const std::pair<std::string, std::string>& key) {
    return "model=\"" + MetricLabel(key.first) + "\",version=\"" + MetricLabel(key.second) + "\"";
  };
  auto family = [&](const char* name, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
    for (const auto& [key, s] : stats)
      out += std::string(name) + "{" + labels(key) + "} " + std::to_string(value(s)) + "\n";
  };
  family("nv_inference_request_success", "Number of successful inference requests, all batch sizes",
         [](const ModelStatistics& s) { return s.success.count; });
  out +=
      "# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes\n"
      "# TYPE nv_inference_request_failure counter\n";
  for (const auto& [key, s] : stats)
    for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
      auto it = s.failures.find(reason);
      out += "nv_inference_request_failure{" + labels(key) + ",reason=\"" + reason + "\"} " +
             std::to_string(it == s.failures.end() ? 0 : it->second) + "\n";
    }
  family("nv_inference_count", "Number of inferences performed (does not include cached requests)",
         [](const ModelStatistics& s) { return s.inference_count; });
  family("nv_inference_exec_count",
         "Number of model executions performed (does not include cached requests)",
         [](const ModelStatistics& s) { return s.execution_count; });
  // Triton's duration counters are whole microseconds.
  family("nv_inference_request_duration_us",
         "Cumulative inference request duration in microseconds of the successful requests "
         "(includes cached requests)",
         [](const ModelStatistics& s) { return s.success.ns / 1000; });
  family("nv_inference_queue_duration_us",
         "Cumulative inference queuing duration in microseconds (includes cached requests)",
         [](const ModelStatistics& s) { return s.queue.ns / 1000; });
  family("nv_inference_compute_input_duration_us",
         "Cumulative compute input duration in microseconds (does not include cached requests)",
         [](const ModelStatistics& s) { return s.compute_input.ns / 1000; });
  family("nv_inference_compute_infer_duration_us",
         "Cumulative compute inference duration in microseconds (does not include cached "
         "requests)",
         [](const ModelStatistics& s) { return s.compute_infer.ns / 1000; });
  family("nv_inference_compute_output_duration_us",
         "Cumulative inference compute output duration in microseconds (does not include cached "
         "requests)",
         [](const ModelStatistics& s) { return s.compute_output.ns / 1000; });
}

}  // namespace bertrt::server

#include "server/common/model_stats.h"

#include "server/common/metrics.h"

namespace bertrt::server {
using serving::DurationStat;
using serving::ModelStatistics;
using nlohmann::json;
using serving::DurationStat;
using serving::ModelStatistics;

namespace {

json Duration(const DurationStat& d) { return json{{"count", d.count}, {"ns", d.ns}}; }

}  // namespace

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

// Triton's per model version statistics as the server answers them: the
// statistics extension (GET /v2/models[/{m}[/versions/{v}]]/stats, gRPC
// ModelStatistics) and Triton's nv_inference_* Prometheus metrics. The serving
// core counts them (serving/model_statistics.h).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "serving/model_statistics.h"

namespace bertrt::server {

// One $model_stat of the statistics extension's JSON.
nlohmann::json StatisticsJson(const std::string& name, const std::string& version,
                              const serving::ModelStatistics& s);

using StatisticsByVersion = std::map<std::pair<std::string, std::string>, serving::ModelStatistics>;

// Appends Triton's nv_inference_* counter families (Prometheus text, labels
// model and version; failures also by reason) for every model version.
void RenderTritonMetrics(const StatisticsByVersion& stats, std::string& out);

}  // namespace bertrt::server

// The pure pieces of `bertrt bench`'s load generator: latency percentiles,
// reading histogram totals out of Prometheus text, generating request texts,
// parsing the load flags, and writing a step's results as JSON, a table row
// or an SVG chart. No I/O and no clocks here, so each is unit-tested alone.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bertrt/status.h"

namespace bertrt::loadgen {

// Nearest-rank percentile of `values` (q in [0, 1]): the smallest value with
// at least q of the values at or below it, so p99 of 100 values is the 99th
// and never an interpolation that no request had. 0 for no values.
double Percentile(std::vector<double> values, double q);

// Sums the samples named exactly `metric` (e.g. "bertrt_queue_duration_seconds_sum")
// in Prometheus text exposition format, over the series whose `model` label
// equals `model` (every series when `model` is empty). NotFound when no
// series matched, so a server without the metric is told apart from zero.
StatusOr<double> SumMetric(const std::string& text, const std::string& metric,
                           const std::string& model);

// The server's own cumulative split: seconds waited in the batcher's queue,
// seconds of engine compute, over `requests` requests.
struct ServerTotals {
  double queue_seconds = 0;
  double compute_seconds = 0;
  double requests = 0;
  // bertrt_request_stage_seconds by stage ("parse", "tokenize", "queue",
  // "compute", "respond"): {sum of seconds, count}; empty from a server
  // without it.
  std::map<std::string, std::pair<double, double>> stages;
};
// From bertrt's /metrics: the bertrt_{queue,compute}_duration_seconds
// histograms and bertrt_request_stage_seconds.
StatusOr<ServerTotals> ParseServerTotals(const std::string& metrics_text, const std::string& model);

// `count` texts of MIN..MAX words each (uniform), drawn from a fixed list of
// common English words: the same texts for the same seed on every machine
// (std::mt19937 is specified; the draws use only its raw output).
std::vector<std::string> GenerateTexts(int count, int min_words, int max_words, uint32_t seed);

// "1,2,4,8": positive integers (in any order; steps run as given).
StatusOr<std::vector<int>> ParseIntList(const std::string& text, const std::string& flag);
// "12.5,50": positive numbers.
StatusOr<std::vector<double>> ParseNumberList(const std::string& text, const std::string& flag);

// scheme://host[:port][/]: scheme lower-cased; port defaults to 80 (http),
// 443 (https), 8001 (grpc, Triton's). No path: the endpoints are fixed.
struct Url {
  std::string scheme, host;
  int port = 0;
};
StatusOr<Url> ParseUrl(const std::string& text);
// "MIN:MAX" with 1 <= MIN <= MAX.
StatusOr<std::pair<int, int>> ParseRange(const std::string& text, const std::string& flag);

// How an open loop spaces its arrivals (perf_analyzer's --request-distribution):
// exponential gaps, or every 1 / rate seconds.
enum class RequestDistribution { kPoisson, kConstant };
const char* RequestDistributionName(RequestDistribution d);
// "poisson" or "constant".
StatusOr<RequestDistribution> ParseRequestDistribution(const std::string& text);

// One measured step: a concurrency (closed loop) or a request rate (open loop).
struct StepResult {
  int concurrency = 0;      // closed loop: workers, each with one request outstanding
  double request_rate = 0;  // open loop: arrivals per second
  // Open loop: how the arrivals were spaced.
  RequestDistribution distribution = RequestDistribution::kPoisson;
  double duration_s = 0;  // measured window
  int64_t requests = 0;   // answered successfully within the window
  int64_t sequences = 0;
  double requests_per_s = 0;
  double sequences_per_s = 0;
  // Latency of the successful requests, ms; open loop: from the scheduled
  // arrival, so a late send counts against the server, not for it.
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  std::map<std::string, int64_t> errors;              // by HTTP status ("429"), or "connection"
  std::map<std::string, std::string> error_messages;  // the first message of each kind
  int64_t late_sends = 0;                             // open loop: sent > 1 ms after their arrival
  // The server's own per-request means over the window (has_server_split:
  // the target reported them).
  bool has_server_split = false;
  double server_queue_ms = 0, server_compute_ms = 0;
  double server_requests = 0;
  // Each request stage's mean over the requests that passed it in the
  // window, ms (ServerTotals::stages).
  std::map<std::string, double> server_stage_ms;

  int64_t error_count() const;
  std::string label() const;  // "c=4" or "r=50"
};

// Latencies (ms) of the successful requests in the window -> the summary fields.
void Summarize(std::vector<double> latencies_ms, StepResult& step);

nlohmann::json StepToJson(const StepResult& step);
StatusOr<StepResult> StepFromJson(const nlohmann::json& j);

// The table: a header line and one line per step.
std::string TableHeader();
std::string TableRow(const StepResult& step);

// A chart of p99 latency (y) against sequences/s (x), one polyline per series,
// each point labelled with its step; self-contained SVG 1.1 text.
struct Series {
  std::string name;
  std::vector<StepResult> steps;
};
std::string RenderSvg(const std::string& title, const std::vector<Series>& series);

}  // namespace bertrt::loadgen

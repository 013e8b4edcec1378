#include "server/common/metrics.h"

#include <cstdio>
#include <tuple>

namespace bertrt::server {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Label values may hold any text; the format escapes \, " and newlines.
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  if (i < counts_.size()) ++counts_[i];
  ++count_;
  sum_ += v;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string& out) const {
  unsigned long cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + labels + ",le=\"" + Num(bounds_[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum{" + labels + "} " + Num(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

Metrics::PerModel& Metrics::Model(const std::string& model) { return models_[model]; }

void Metrics::CountRequest(const std::string& model, const std::string& endpoint, bool success) {
  std::lock_guard lock(mu_);
  ++requests_[{model, endpoint, success}];
}

void Metrics::ObserveRequest(const std::string& model, double queue_seconds,
                             double compute_seconds) {
  std::lock_guard lock(mu_);
  PerModel& m = Model(model);
  m.queue.Observe(queue_seconds);
  m.compute.Observe(compute_seconds);
}

void Metrics::ObserveBatch(const std::string& model, int sequences, int tokens) {
  std::lock_guard lock(mu_);
  PerModel& m = Model(model);
  m.batch_size.Observe(sequences);
  m.batch_tokens.Observe(tokens);
}

void Metrics::AddInFlight(int delta) {
  std::lock_guard lock(mu_);
  in_flight_ += delta;
}

std::string Metrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  Header(out, "bertrt_request_success_total", "counter", "Requests answered successfully.");
  for (const auto& [key, n] : requests_) {
    const auto& [model, endpoint, success] = key;
    if (!success) continue;
    out += "bertrt_request_success_total{model=\"" + Escape(model) + "\",endpoint=\"" +
           Escape(endpoint) + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "bertrt_request_failure_total", "counter", "Requests answered with an error.");
  for (const auto& [key, n] : requests_) {
    const auto& [model, endpoint, success] = key;
    if (success) continue;
    out += "bertrt_request_failure_total{model=\"" + Escape(model) + "\",endpoint=\"" +
           Escape(endpoint) + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "bertrt_inflight_requests", "gauge", "Requests being handled now.");
  out += "bertrt_inflight_requests " + std::to_string(in_flight_) + "\n";
  const std::pair<const char*, const char*> hists[] = {
      {"bertrt_queue_duration_seconds", "Time a request waited in the batcher's queue."},
      {"bertrt_compute_duration_seconds", "Engine time of the batch a request ran in."},
      {"bertrt_batch_size", "Sequences per engine batch."},
      {"bertrt_batch_tokens", "Tokens per engine batch."}};
  for (int h = 0; h < 4; ++h) {
    Header(out, hists[h].first, "histogram", hists[h].second);
    for (const auto& [model, m] : models_) {
      const Histogram* which[] = {&m.queue, &m.compute, &m.batch_size, &m.batch_tokens};
      which[h]->Render(hists[h].first, "model=\"" + Escape(model) + "\"", out);
    }
  }
  return out;
}

}  // namespace bertrt::server

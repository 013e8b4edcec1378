// Server metrics in the Prometheus text exposition format (version 0.0.4).
// prometheus-cpp is not packaged in Debian bookworm, and the format is a few
// lines of text, so the counters, gauge and histograms are written here.
// GPU memory and utilisation come from NVML when the driver provides it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bertrt/status.h"
#include "server/common/model_stats.h"

namespace bertrt::server {

// A label value in the exposition format: \, " and newlines escaped (label
// values may hold any text).
std::string MetricLabel(const std::string& s);

// A failed request's class (the `error` label of bertrt_request_failure_total,
// `err` of TEI's te_request_failure): validation, too_large, unsupported,
// not_found, unauthorized, method, overloaded, timeout, unavailable,
// internal; by the HTTP status it was answered with, or its Status.
const char* FailureClass(int http_status);
const char* FailureClass(StatusCode code);

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size()) {}
  void Observe(double v);
  // The _bucket/_sum/_count lines with `labels` (e.g. model="x").
  void Render(const std::string& name, const std::string& labels, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<unsigned long> counts_;  // per bucket, not cumulative
  unsigned long count_ = 0;
  double sum_ = 0;
};

class Metrics : public serving::MetricsSink {
 public:
  // Triton's nv_inference_* series of each loaded model version, from its own
  // statistics (model_stats.h: every inference request on it and each engine
  // batch it runs add to them): listed from the version's load, at zero, until
  // it is unloaded, as Triton adds and removes a model's series. While a
  // version is loaded again (poll mode, explicit load) the newest load's
  // statistics are listed; if that load is dropped (another version of the
  // model failed), the one still served is listed again.
  void AddModelVersion(const std::string& model, const std::string& version,
                       std::shared_ptr<const serving::VersionStatistics> stats) override;
  // The loaded version holding `stats` is gone (unloaded or replaced).
  void RemoveModelVersion(const std::string& model, const std::string& version,
                          const serving::VersionStatistics* stats) override;

  // A request answered: with `http_status` (failed from 400), or `outcome`.
  void CountRequest(const std::string& model, const std::string& endpoint, int http_status);
  void CountRequest(const std::string& model, const std::string& endpoint, const Status& outcome);
  // An inference request done (RequestTimer::Finish): the end-to-end
  // latency histogram, the batcher's queue and compute time where it ran,
  // and for a successful one TEI's per-stage histograms.
  void ObserveInference(const std::string& model, const serving::InferenceRecord& record) override;
  // One engine batch of `model` on `instance` ("cpu", "cuda:0", ...).
  void ObserveBatch(const std::string& model, const std::string& instance, int sequences,
                    int tokens, double compute_seconds) override;
  void AddInFlight(int delta);
  // The Prometheus text: the counters above, the process and heap gauges,
  // then the NVML GPU gauges.
  std::string Render() const;

 private:
  std::string RenderCounters() const;
  void Count(const std::string& model, const std::string& endpoint, const char* failure);
  // A stage of a request, seconds (from a microsecond).
  static std::vector<double> Stage() {
    return {1e-6, 1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.1, 1};
  }
  // Request latencies, seconds.
  static std::vector<double> Latency() {
    return {5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  }
  static constexpr int kStages = 5;
  static constexpr const char* kStageNames[kStages] = {"parse", "tokenize", "queue", "compute",
                                                       "respond"};
  // The stages TEI has histograms of, by its names (nullptr: none).
  static constexpr const char* kTeiStageNames[kStages] = {
      nullptr, "te_request_tokenization_duration", "te_request_queue_duration",
      "te_request_inference_duration", nullptr};
  struct PerModel {
    Histogram request{Latency()};
    Histogram stages[kStages] = {Histogram(Stage()), Histogram(Stage()), Histogram(Stage()),
                                 Histogram(Stage()), Histogram(Stage())};
    // TEI's te_request_duration: successful inferences, arrival to answer.
    Histogram te_request{Latency()};
    Histogram queue{{1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}};
    Histogram compute{{1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
    Histogram batch_size{{1, 2, 4, 8, 16, 32, 64, 128, 256}};
    Histogram batch_tokens{{16, 64, 256, 1024, 4096, 16384, 65536}};
    // TEI's te_request_input_length: each input's tokens, in its buckets
    // (powers of two).
    Histogram input_tokens{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                            16384, 32768}};
  };
  PerModel& Model(const std::string& model);

  mutable std::mutex mu_;
  // (model, endpoint, failure class: "" for success) -> count
  std::map<std::tuple<std::string, std::string, std::string>, unsigned long> requests_;
  std::map<std::string, PerModel> models_;
  struct PerInstance {
    unsigned long batches = 0, sequences = 0;
    double compute_seconds = 0;
  };
  std::map<std::pair<std::string, std::string>, PerInstance> instances_;  // (model, instance)
  std::atomic<long> in_flight_{0};  // counted without the lock
  // (model, version) -> the statistics of its loads alive, oldest first.
  std::map<std::pair<std::string, std::string>,
           std::vector<std::shared_ptr<const serving::VersionStatistics>>>
      triton_;
};

// Holds the in-flight gauge up for one request's lifetime.
class InFlightGuard {
 public:
  explicit InFlightGuard(Metrics& m) : m_(m) { m_.AddInFlight(1); }
  ~InFlightGuard() { m_.AddInFlight(-1); }
  InFlightGuard(const InFlightGuard&) = delete;
  InFlightGuard& operator=(const InFlightGuard&) = delete;

 private:
  Metrics& m_;
};

}  // namespace bertrt::server

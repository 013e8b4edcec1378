#include "server/common/metrics.h"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <tuple>

namespace bertrt::server {
using serving::InferenceRecord;
using serving::VersionStatistics;

namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// NVML, opened at run time from the driver's libnvidia-ml.so.1 so that the
// server neither links nor needs it: a machine without a GPU just has no GPU
// lines. The few declarations below are NVML's stable C ABI.
class Nvml {
 public:
  static const Nvml& Get() {
    static const Nvml nvml;
    return nvml;
  }
  // Appends the GPU gauges; nothing when NVML is not there.
  void Render(std::string& out) const {
    if (!ok_) return;
    unsigned count = 0;
    if (get_count_(&count) != 0) return;
    std::string used, total, util;
    for (unsigned i = 0; i < count; ++i) {
      void* device = nullptr;
      if (get_handle_(i, &device) != 0) continue;
      const std::string label = "{gpu=\"" + std::to_string(i) + "\"} ";
      Memory mem{};
      if (get_memory_(device, &mem) == 0) {
        used += "bertrt_gpu_memory_used_bytes" + label + Num(static_cast<double>(mem.used)) + "\n";
        total +=
            "bertrt_gpu_memory_total_bytes" + label + Num(static_cast<double>(mem.total)) + "\n";
      }
      Utilization u{};
      if (get_utilization_(device, &u) == 0)
        util += "bertrt_gpu_utilization_ratio" + label + Num(u.gpu / 100.0) + "\n";
    }
    Header(out, "bertrt_gpu_memory_used_bytes", "gauge",
           "GPU memory in use (NVML, all processes).");
    out += used;
    Header(out, "bertrt_gpu_memory_total_bytes", "gauge", "GPU memory (NVML).");
    out += total;
    Header(out, "bertrt_gpu_utilization_ratio", "gauge",
           "Fraction of the last sample period a kernel ran on the GPU (NVML).");
    out += util;
  }

 private:
  struct Memory {
    unsigned long long total, free, used;
  };
  struct Utilization {
    unsigned gpu, memory;
  };
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    get_count_ = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    get_handle_ =
        reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    get_memory_ = reinterpret_cast<int (*)(void*, Memory*)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    get_utilization_ =
        reinterpret_cast<int (*)(void*, Utilization*)>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    ok_ = init && get_count_ && get_handle_ && get_memory_ && get_utilization_ && init() == 0;
  }
  bool ok_ = false;
  int (*get_count_)(unsigned*) = nullptr;
  int (*get_handle_)(unsigned, void**) = nullptr;
  int (*get_memory_)(void*, Memory*) = nullptr;
  int (*get_utilization_)(void*, Utilization*) = nullptr;
};

// The process gauges Prometheus' client libraries export under these names
// (from /proc/self), and glibc's heap: memory the program holds against memory
// malloc keeps free, which tells a leak (the first grows) from fragmentation
// (the second grows) when the resident size creeps.
void RenderProcess(std::string& out) {
  std::ifstream statm("/proc/self/statm");
  unsigned long virtual_pages = 0, resident_pages = 0;
  if (statm >> virtual_pages >> resident_pages) {
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    Header(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    out += "process_virtual_memory_bytes " + Num(virtual_pages * page) + "\n";
    Header(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    out += "process_resident_memory_bytes " + Num(resident_pages * page) + "\n";
  }
  std::error_code ec;
  size_t threads = 0, fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++threads;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  Header(out, "process_threads", "gauge", "Threads of the process.");
  out += "process_threads " + std::to_string(threads) + "\n";
  Header(out, "process_open_fds", "gauge", "Open file descriptors.");
  out += "process_open_fds " + std::to_string(fds) + "\n";
#ifdef __GLIBC__
  const struct mallinfo2 heap = mallinfo2();
  Header(out, "bertrt_heap_in_use_bytes", "gauge",
         "Bytes the program holds from malloc (glibc mallinfo2 uordblks + hblkhd).");
  out += "bertrt_heap_in_use_bytes " + Num(static_cast<double>(heap.uordblks + heap.hblkhd)) + "\n";
  Header(out, "bertrt_heap_free_bytes", "gauge",
         "Bytes malloc keeps free in its arenas, not returned to the system (mallinfo2 fordblks).");
  out += "bertrt_heap_free_bytes " + Num(static_cast<double>(heap.fordblks)) + "\n";
#endif
}

}  // namespace

std::string MetricLabel(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

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

const char* FailureClass(int http_status) {
  switch (http_status) {
    case 401:
    case 403: return "unauthorized";
    case 404: return "not_found";
    case 405: return "method";
    case 408:
    case 504: return "timeout";
    case 413: return "too_large";
    case 424: return "unsupported";
    case 429: return "overloaded";
    case 503: return "unavailable";
    default: return http_status >= 500 ? "internal" : "validation";
  }
}

const char* FailureClass(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return "validation";
    case StatusCode::kOutOfRange: return "too_large";
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented: return "unsupported";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kResourceExhausted: return "overloaded";
    case StatusCode::kDeadlineExceeded: return "timeout";
    case StatusCode::kUnavailable: return "unavailable";
    default: return "internal";
  }
}

Metrics::PerModel& Metrics::Model(const std::string& model) { return models_[model]; }

void Metrics::Count(const std::string& model, const std::string& endpoint, const char* failure) {
  std::lock_guard lock(mu_);
  ++requests_[{model, endpoint, failure}];
}

void Metrics::CountRequest(const std::string& model, const std::string& endpoint,
                           int http_status) {
  Count(model, endpoint, http_status < 400 ? "" : FailureClass(http_status));
}

void Metrics::CountRequest(const std::string& model, const std::string& endpoint,
                           const Status& outcome) {
  Count(model, endpoint, outcome.ok() ? "" : FailureClass(outcome.code()));
}

void Metrics::ObserveInference(const std::string& model, const InferenceRecord& r) {
  std::lock_guard lock(mu_);
  PerModel& m = Model(model);
  m.request.Observe(r.request_seconds);
  for (int tokens : r.input_tokens) m.input_tokens.Observe(tokens);
  if (r.computed) {
    m.queue.Observe(r.queue_seconds);
    m.compute.Observe(r.infer_seconds);
  }
  if (r.code != StatusCode::kOk) return;
  const double stages[] = {r.parse_seconds, r.input_seconds - r.parse_seconds, r.queue_seconds,
                           r.infer_seconds, r.output_seconds};
  for (int s = 0; s < kStages; ++s) m.stages[s].Observe(stages[s]);
  m.te_request.Observe(r.request_seconds);
}

void Metrics::ObserveBatch(const std::string& model, const std::string& instance, int sequences,
                           int tokens, double compute_seconds) {
  std::lock_guard lock(mu_);
  PerModel& m = Model(model);
  m.batch_size.Observe(sequences);
  m.batch_tokens.Observe(tokens);
  PerInstance& i = instances_[{model, instance}];
  ++i.batches;
  i.sequences += sequences;
  i.compute_seconds += compute_seconds;
}

void Metrics::AddInFlight(int delta) { in_flight_.fetch_add(delta, std::memory_order_relaxed); }

std::string Metrics::Render() const {
  std::string out = RenderCounters();
  // Outside the lock: slow /proc, malloc and driver calls must not hold up
  // request counting.
  RenderProcess(out);
  Nvml::Get().Render(out);
  return out;
}

std::string Metrics::RenderCounters() const {
  std::lock_guard lock(mu_);
  std::string out;
  Header(out, "bertrt_request_success_total", "counter", "Requests answered successfully.");
  for (const auto& [key, n] : requests_) {
    const auto& [model, endpoint, failure] = key;
    if (!failure.empty()) continue;
    out += "bertrt_request_success_total{model=\"" + MetricLabel(model) + "\",endpoint=\"" +
           MetricLabel(endpoint) + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "bertrt_request_failure_total", "counter",
         "Requests answered with an error, by class (error).");
  std::map<std::string, unsigned long> by_class;  // for TEI's te_request_failure
  unsigned long all = 0, succeeded = 0;
  for (const auto& [key, n] : requests_) {
    const auto& [model, endpoint, failure] = key;
    all += n;
    if (failure.empty()) {
      succeeded += n;
      continue;
    }
    by_class[failure] += n;
    out += "bertrt_request_failure_total{model=\"" + MetricLabel(model) + "\",endpoint=\"" +
           MetricLabel(endpoint) + "\",error=\"" + failure + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "bertrt_inflight_requests", "gauge", "Requests being handled now.");
  out += "bertrt_inflight_requests " + std::to_string(in_flight_.load(std::memory_order_relaxed)) + "\n";
  // Histograms per model: bertrt's, then the same under TEI's names.
  const std::tuple<const char*, const char*, Histogram PerModel::*> hists[] = {
      {"bertrt_request_duration_seconds",
       "Inference requests from arrival to answer (every outcome).", &PerModel::request},
      {"bertrt_queue_duration_seconds", "Time a request waited in the batcher's queue.",
       &PerModel::queue},
      {"bertrt_compute_duration_seconds", "Engine time of the batch a request ran in.",
       &PerModel::compute},
      {"bertrt_batch_size", "Sequences per engine batch.", &PerModel::batch_size},
      {"bertrt_batch_tokens", "Tokens per engine batch.", &PerModel::batch_tokens},
      {"te_request_duration", "Successful inference requests, arrival to answer (TEI's name).",
       &PerModel::te_request},
      {"te_batch_next_size", "Sequences per engine batch (TEI's name).", &PerModel::batch_size},
      {"te_batch_next_tokens", "Tokens per engine batch (TEI's name).", &PerModel::batch_tokens},
      {"te_request_input_length", "Tokens of each input given to the batcher (TEI's name).",
       &PerModel::input_tokens}};
  for (const auto& [name, help, member] : hists) {
    Header(out, name, "histogram", help);
    for (const auto& [model, m] : models_)
      (m.*member).Render(name, "model=\"" + MetricLabel(model) + "\"", out);
  }
  Header(out, "bertrt_request_stage_seconds", "histogram",
         "Successful inference requests' time by stage: parse (the body read into inputs), "
         "tokenize, queue, compute (the batch's engine time), respond (the answer's body "
         "written).");
  for (const auto& [model, m] : models_)
    for (int s = 0; s < kStages; ++s)
      m.stages[s].Render("bertrt_request_stage_seconds",
                         "model=\"" + MetricLabel(model) + "\",stage=\"" + kStageNames[s] + "\"",
                         out);
  // Three of the stages under TEI's names.
  for (int s = 0; s < kStages; ++s) {
    if (!kTeiStageNames[s]) continue;
    const std::string help =
        std::string("The ") + kStageNames[s] + " stage of successful inferences (TEI's name).";
    Header(out, kTeiStageNames[s], "histogram", help.c_str());
    for (const auto& [model, m] : models_)
      m.stages[s].Render(kTeiStageNames[s], "model=\"" + MetricLabel(model) + "\"", out);
  }
  // TEI's request counters (its exporter's names, without _total).
  Header(out, "te_request_count", "counter", "Requests answered (TEI's name).");
  out += "te_request_count " + std::to_string(all) + "\n";
  Header(out, "te_request_success", "counter", "Requests answered successfully (TEI's name).");
  out += "te_request_success " + std::to_string(succeeded) + "\n";
  Header(out, "te_request_failure", "counter", "Requests answered with an error, by class "
                                                "(TEI's name; err as bertrt's error label).");
  for (const auto& [failure, n] : by_class)
    out += "te_request_failure{err=\"" + failure + "\"} " + std::to_string(n) + "\n";
  // Per instance, so that a GPU that does less than its share shows.
  const std::tuple<const char*, const char*, int> per_instance[] = {
      {"bertrt_instance_batches_total", "Engine batches run by each instance.", 0},
      {"bertrt_instance_sequences_total", "Sequences computed by each instance.", 1},
      {"bertrt_instance_compute_seconds_total", "Engine time of each instance.", 2}};
  for (const auto& [name, help, which] : per_instance) {
    Header(out, name, "counter", help);
    for (const auto& [key, i] : instances_) {
      const double v = which == 0 ? i.batches : which == 1 ? i.sequences : i.compute_seconds;
      out += std::string(name) + "{model=\"" + MetricLabel(key.first) + "\",instance=\"" +
             MetricLabel(key.second) + "\"} " + Num(v) + "\n";
    }
  }
  // The same requests and batches under Triton's names, for its dashboards.
  StatisticsByVersion triton;
  for (const auto& [key, loads] : triton_) triton[key] = loads.back()->Snapshot();
  RenderTritonMetrics(triton, out);
  return out;
}

void Metrics::AddModelVersion(const std::string& model, const std::string& version,
                              std::shared_ptr<const VersionStatistics> stats) {
  std::lock_guard lock(mu_);
  triton_[{model, version}].push_back(std::move(stats));
}

void Metrics::RemoveModelVersion(const std::string& model, const std::string& version,
                                 const VersionStatistics* stats) {
  std::lock_guard lock(mu_);
  auto it = triton_.find({model, version});
  if (it == triton_.end()) return;
  auto& loads = it->second;
  loads.erase(
      std::remove_if(loads.begin(), loads.end(), [&](const auto& s) { return s.get() == stats; }),
      loads.end());
  if (loads.empty()) triton_.erase(it);
}

}  // namespace bertrt::server

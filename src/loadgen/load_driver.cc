#include "loadgen/load_driver.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

namespace bertrt::loadgen {
namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  Clock::time_point end;
  double latency_ms = 0;
  int status = 200;
  int sequences = 0;
  bool late = false;
  std::string error;
};

// Arrival times: Poisson (exponential gaps, from raw mt19937_64 output so a
// seed gives the same schedule with any standard library) or evenly spaced.
// Used by one thread (the open loop's dispatcher).
class Arrivals {
 public:
  Arrivals(double rate, RequestDistribution distribution, uint32_t seed)
      : rate_(rate), distribution_(distribution), rng_(seed) {}
  // Seconds from the start of the step of the next arrival.
  double Next() {
    const double t = next_;
    if (distribution_ == RequestDistribution::kConstant) {
      next_ += 1 / rate_;
    } else {
      const double u = (rng_() >> 11) * 0x1.0p-53;  // [0, 1)
      next_ += -std::log1p(-u) / rate_;
    }
    return t;
  }

 private:
  double rate_;
  RequestDistribution distribution_;
  std::mt19937_64 rng_;
  double next_ = 0;
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

std::vector<std::string> TextPool::Take(uint64_t request_index, int per_request) const {
  std::vector<std::string> out;
  out.reserve(per_request);
  for (int j = 0; j < per_request; ++j)
    out.push_back(texts_[(request_index * per_request + j) % texts_.size()]);
  return out;
}

StatusOr<StepResult> RunStep(Target& target, const TextPool& pool, const StepOptions& options) {
  if (pool.size() == 0) return InvalidArgument("no texts to send");
  const bool closed = options.concurrency > 0;
  if (!closed && options.request_rate <= 0)
    return InvalidArgument("a step needs a concurrency or a request rate");
  const int workers = closed ? options.concurrency : options.max_inflight;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < workers; ++i) {
    ASSIGN_OR_RETURN(auto client, target.NewClient());
    clients.push_back(std::move(client));
  }

  std::atomic<bool> stop{false};
  std::mutex mu;  // guards the open loop's hand-offs and the stop
  std::condition_variable stop_cv;
  std::atomic<int64_t> window_start_ns{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> answered{0};
  std::atomic<uint64_t> next_request{0};
  std::vector<std::vector<Record>> records(workers);
  const Clock::time_point t_start = Clock::now();

  // Sends worker w's next request, due at `scheduled`, and records it.
  auto send = [&](int w, Clock::time_point scheduled) {
    const std::vector<std::string> texts =
        pool.Take(next_request.fetch_add(1), options.sequences_per_request);
    const Clock::time_point sent = Clock::now();
    Outcome out = clients[w]->Send(texts);
    const Clock::time_point end = Clock::now();
    Record r;
    r.end = end;
    r.latency_ms = Ms(end - scheduled);
    r.status = out.status;
    r.sequences = static_cast<int>(texts.size());
    r.late = !closed && Ms(sent - scheduled) > 1.0;
    r.error = std::move(out.error);
    records[w].push_back(std::move(r));
    if ((end - t_start).count() >= window_start_ns.load()) answered.fetch_add(1);
  };

  // Open loop: one dispatcher thread keeps the schedule and hands each
  // arrival to the worker that became idle last, so that a request goes out
  // on a connection kept open from the one before, as a client pool reuses
  // them (perf_analyzer's request-rate mode alike). Handing arrivals to
  // workers ahead of time would open a new connection per request, and on a
  // thread-per-connection server every kept-alive one holds a thread.
  std::vector<int> idle;  // a stack: the most recently idle worker last
  std::vector<std::condition_variable> wake(closed ? 0 : workers);
  std::vector<std::optional<Clock::time_point>> due(closed ? 0 : workers);  // handed, not yet taken
  std::condition_variable idle_cv;
  Arrivals arrivals(closed ? 1.0 : options.request_rate, options.distribution, options.seed);

  auto worker = [&](int w) {
    while (!stop.load()) {
      if (closed) {
        send(w, Clock::now());
        continue;
      }
      Clock::time_point scheduled;
      {
        std::unique_lock lock(mu);
        idle.push_back(w);
        idle_cv.notify_one();
        wake[w].wait(lock, [&] { return stop.load() || due[w].has_value(); });
        if (!due[w]) break;
        scheduled = *due[w];
        due[w].reset();
      }
      send(w, scheduled);
    }
  };
  auto dispatcher = [&] {
    for (;;) {
      const Clock::time_point scheduled =
          t_start + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(arrivals.Next()));
      std::unique_lock lock(mu);
      if (stop_cv.wait_until(lock, scheduled, [&] { return stop.load(); })) break;
      // No worker idle (max_inflight outstanding): the arrival waits for
      // one, and is counted late when sent.
      idle_cv.wait(lock, [&] { return stop.load() || !idle.empty(); });
      if (stop.load()) break;
      const int w = idle.back();
      idle.pop_back();
      due[w] = scheduled;
      wake[w].notify_one();
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(worker, w);
  if (!closed) threads.emplace_back(dispatcher);

  auto stop_all = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    stop_cv.notify_all();
    idle_cv.notify_all();
    for (std::condition_variable& cv : wake) cv.notify_all();
    for (std::thread& t : threads) t.join();
  };
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };

  double last_progress = -1e9;
  auto progress = [&](double elapsed) {
    if (options.on_progress && seconds_since(t_start) - last_progress >= 0.1) {
      last_progress = seconds_since(t_start);
      options.on_progress(elapsed, answered.load());
    }
  };
  while (seconds_since(t_start) < options.warmup_s) {
    progress(seconds_since(t_start) - options.warmup_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Clock::time_point w0 = Clock::now();
  window_start_ns = (w0 - t_start).count();
  StatusOr<ServerTotals> before = target.Totals();
  while (options.requests > 0 ? answered.load() < options.requests
                              : seconds_since(w0) < options.duration_s) {
    progress(seconds_since(w0));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Clock::time_point w1 = Clock::now();
  // Read at the window's end, while requests are still in flight: the server
  // records a request when it answers, so both reads bracket the same answers
  // the client counts below.
  StatusOr<ServerTotals> after = target.Totals();
  stop_all();

  StepResult step;
  step.concurrency = closed ? options.concurrency : 0;
  step.request_rate = closed ? 0 : options.request_rate;
  step.distribution = options.distribution;
  step.duration_s = std::chrono::duration<double>(w1 - w0).count();
  std::vector<double> latencies;
  for (const auto& per_worker : records)
    for (const Record& r : per_worker) {
      if (r.end < w0 || r.end > w1) continue;
      step.late_sends += r.late;
      if (r.status >= 200 && r.status < 300) {
        latencies.push_back(r.latency_ms);
        step.sequences += r.sequences;
        continue;
      }
      const std::string key = r.status == 0 ? "connection" : std::to_string(r.status);
      ++step.errors[key];
      if (!step.error_messages.count(key)) step.error_messages[key] = r.error;
    }
  Summarize(std::move(latencies), step);
  if (before.ok() && after.ok() && after->requests > before->requests) {
    const double n = after->requests - before->requests;
    step.has_server_split = true;
    step.server_requests = n;
    step.server_queue_ms = 1000 * (after->queue_seconds - before->queue_seconds) / n;
    step.server_compute_ms = 1000 * (after->compute_seconds - before->compute_seconds) / n;
    for (const auto& [stage, totals] : after->stages) {
      auto was = before->stages.find(stage);
      const std::pair<double, double> start =
          was == before->stages.end() ? std::pair{0.0, 0.0} : was->second;
      if (totals.second > start.second)
        step.server_stage_ms[stage] =
            1000 * (totals.first - start.first) / (totals.second - start.second);
    }
  }
  return step;
}

}  // namespace bertrt::loadgen

// The load generator's driver: sends requests of texts to a Target, closed
// loop (N workers, one request outstanding each) or open loop (Poisson
// arrivals at a rate), over a warm-up and a measured window, and summarizes
// the window. A target is a transport (HTTP, gRPC, in-process); the
// driver knows only this interface.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loadgen/load_stats.h"

namespace bertrt::loadgen {

struct Outcome {
  // 200 for success; an error's HTTP status (the in-process target maps its
  // Status the way the server does, so both count errors alike); 0 when no
  // answer came (connection refused, reset, timed out).
  int status = 200;
  std::string error;  // the message, for the first error of a kind
};

// One worker's connection: Send is called from one thread at a time.
class Client {
 public:
  virtual ~Client() = default;
  virtual Outcome Send(const std::vector<std::string>& texts) = 0;
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string Describe() const = 0;
  virtual StatusOr<std::unique_ptr<Client>> NewClient() = 0;
  // Cumulative server-side totals now; Unimplemented when the target has none
  // (the step then reports no split).
  virtual StatusOr<ServerTotals> Totals() = 0;
  // What the target says of itself (a server's /info), for the report; null: nothing.
  virtual nlohmann::json Details() const { return nullptr; }
};

// What request i sends: `per_request` consecutive texts of the pool, cycling.
class TextPool {
 public:
  explicit TextPool(std::vector<std::string> texts) : texts_(std::move(texts)) {}
  std::vector<std::string> Take(uint64_t request_index, int per_request) const;
  size_t size() const { return texts_.size(); }

 private:
  std::vector<std::string> texts_;
};

struct StepOptions {
  int concurrency = 0;      // > 0: closed loop
  double request_rate = 0;  // > 0: open loop
  int max_inflight = 64;    // open loop: sender threads (arrivals beyond wait, counted late)
  // Open loop: how the arrivals are spaced.
  RequestDistribution distribution = RequestDistribution::kPoisson;
  double warmup_s = 1;
  double duration_s = 5;
  int64_t requests = 0;  // > 0: the window ends after this many answers instead
  int sequences_per_request = 1;
  uint32_t seed = 1234;
  // Called about every 100 ms from the calling thread: seconds into the
  // window (negative: warming up), and answers so far in it.
  std::function<void(double elapsed_s, int64_t answered)> on_progress;
};

// Runs one step. Fails when a client cannot be opened; failed requests are
// counted in the result, never fatal.
StatusOr<StepResult> RunStep(Target& target, const TextPool& pool, const StepOptions& options);

}  // namespace bertrt::loadgen

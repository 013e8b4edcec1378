// A per-model dynamic batcher: requests of tokenized sequences wait in one
// bounded queue; a worker per engine instance forms ragged batches under a
// token budget and a size cap, waiting at most max_queue_delay for company,
// and hands each request back exactly its own sequences' outputs. A request
// larger than one batch runs as parts that take turns with the other
// requests. It knows nothing of HTTP or JSON: native ids in, engine outputs
// out.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bertrt/engine.h"
#include "bertrt/status.h"

namespace bertrt {

struct SequenceInput {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;
  int32_t pool_start = 0;  // RaggedBatch::pool_start
};

// One client request. Its sequences are computed in one batch when they fit
// one (max_batch_size, max_batch_tokens); a larger request is split into
// parts of consecutive sequences that do, and each part, once taken into a
// batch, queues the next behind the requests that arrived meanwhile: a
// request of a thousand texts delays a one-word request by one batch, not by
// all of it (round robin between requests, part by part).
struct InferRequest {
  std::vector<SequenceInput> sequences;
  // last_hidden_state: a batch returns it when one of its requests asks.
  // normalize: requests that differ never share a batch.
  RunOptions run;
  // Polled just before compute; true drops the request (the client went away).
  std::function<bool()> is_cancelled;
};

struct InferResult {
  // Only this request's rows: per-sequence outputs [num_seqs, width] in
  // request order, per-token outputs over its own tokens (split by cu_seqlens).
  BatchOutputs outputs;
  std::vector<int32_t> cu_seqlens{0};
  double queue_seconds = 0;
  double compute_seconds = 0;
  int batch_requests = 0;  // requests in the batch it ran in
};

// Reported once per computed batch (for metrics).
struct BatchStats {
  int requests = 0;
  int sequences = 0;
  int tokens = 0;
  double compute_seconds = 0;
  bool ok = true;
  int instance = 0;  // index of the engine that ran it
};

struct SchedulerOptions {
  int max_batch_tokens = 16384;  // a single request above it runs alone
  int max_batch_size = 64;       // sequences per batch
  // Sequences one request may carry (TEI's max_client_batch_size); 0:
  // kDefaultClientBatch, or a batch if larger. Beyond: OutOfRange, before
  // queueing. A request larger than a batch runs in parts that take turns
  // with the requests arriving meanwhile (a request of 1,000 texts once held
  // the only CPU engine for a minute while a one-word request timed out
  // behind it), and the payload limit bounds its bytes.
  int max_client_batch_size = 0;
  // What OpenAI's embeddings API takes in one request: LangChain's
  // OpenAIEmbeddings sends 1,000 texts a request by default.
  static constexpr int kDefaultClientBatch = 2048;
  int client_batch_limit() const {
    return max_client_batch_size > 0 ? max_client_batch_size
                                     : std::max(kDefaultClientBatch, max_batch_size);
  }
  // OutOfRange when `inputs` is over client_batch_limit(), saying how to fix it.
  Status CheckClientBatch(size_t inputs) const;
  // Ascending. When the queue holds at least the smallest, a batch leaves at
  // once, of the largest preferred size the queue fills (Triton's semantics).
  std::vector<int> preferred_batch_sizes;
  // How long an idle instance waits for a fuller batch. 0 (Triton's default)
  // runs whatever is queued at once: under load, batches still fill with what
  // arrives while the instances are busy, and at low load nothing waits.
  std::chrono::microseconds max_queue_delay{0};
  size_t max_queue_size = 1024;                  // requests waiting; beyond: ResourceExhausted
  std::chrono::milliseconds request_timeout{0};  // 0: none
  std::function<void(const BatchStats&)> on_batch;
};

class Scheduler {
 public:
  // One worker thread per engine; all engines must serve the same model.
  Scheduler(std::vector<std::unique_ptr<Engine>> engines, SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Never blocks. The future holds the result, or: InvalidArgument (bad ids,
  // checked before queueing), ResourceExhausted (queue full, at once),
  // DeadlineExceeded (timed out in the queue), Unavailable (cancelled or
  // shutting down), or the engine's error.
  std::future<StatusOr<InferResult>> Submit(InferRequest request);
  StatusOr<InferResult> Infer(InferRequest request) { return Submit(std::move(request)).get(); }

  // Stops taking requests, computes those already queued, joins the workers.
  void Shutdown();
  // Stops taking requests and fails every request still queued with `why`
  // (batches already running finish): what a shutdown whose drain ran out of
  // time gives up on.
  void CancelQueued(const Status& why);

  const ModelConfig& config() const { return engines_.front()->config(); }
  const SchedulerOptions& options() const { return options_; }
  size_t queued() const;
  // Each engine's device ("cpu:4t", "cuda:0") and the activation memory it
  // holds (Engine::PeakMemoryBytes: it grows with the largest batch run).
  std::vector<std::pair<std::string, size_t>> EngineMemory() const;

 private:
  using Clock = std::chrono::steady_clock;
  // A client request and the outcome of its parts.
  struct Job {
    InferRequest request;
    // Part i is sequences [cuts[i], cuts[i + 1]).
    std::vector<int> cuts;
    int next_part = 1;  // the next part to queue; guarded by the scheduler's mu_
    std::promise<StatusOr<InferResult>> promise;
    std::atomic<bool> finished{false};  // the promise is set (an error, or every part)
    std::mutex mu;                      // guards results and remaining
    std::vector<InferResult> results;   // by part
    int remaining = 0;                  // parts not yet computed
    Clock::time_point submitted;        // when its first part was queued
    int parts() const { return static_cast<int>(cuts.size()) - 1; }
  };
  // One part of a job in the queue or in a batch.
  struct Pending {
    std::shared_ptr<Job> job;
    int part = 0, first = 0, count = 0;  // sequences [first, first + count) of the request
    Clock::time_point enqueued;
    int tokens = 0;
    int max_len = 0;
  };
  using PendingPtr = std::unique_ptr<Pending>;

  // Part `part` of `job`, enqueued now.
  static PendingPtr MakePart(const std::shared_ptr<Job>& job, int part);
  // Cuts `request` into parts within one batch's size cap and token budget
  // (a sequence alone over the budget is a part of its own).
  std::vector<int> PartCuts(const InferRequest& request) const;
  // Records a part's outcome: a job fails with its first error; it succeeds,
  // its parts' outputs joined in order, once every part has.
  static void Finish(const Pending& p, StatusOr<InferResult> result);

  void WorkerLoop(int instance);
  // With mu_ held: waits until a batch is worth forming; false when the
  // scheduler stopped and the queue is drained.
  bool WaitForWork(std::unique_lock<std::mutex>& lock);
  bool QueueFillsBatch() const;
  // With mu_ held: removes timed-out and cancelled requests into `dropped`.
  void TakeExpired(std::vector<PendingPtr>& dropped);
  // With mu_ held: the oldest request plus the queued ones closest in length
  // that fit the budgets (similar lengths keep attention cost even).
  std::vector<PendingPtr> TakeBatch();
  void RunBatch(int instance, std::vector<PendingPtr>& batch);

  std::vector<std::unique_ptr<Engine>> engines_;
  SchedulerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingPtr> queue_;
  int queued_tokens_ = 0;
  int queued_seqs_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace bertrt

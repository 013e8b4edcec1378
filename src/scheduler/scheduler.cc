#include "scheduler/scheduler.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "bertrt/head_outputs.h"
#include "core/thread_name.h"

namespace bertrt {
namespace {

std::future<StatusOr<InferResult>> Ready(Status status) {
  std::promise<StatusOr<InferResult>> p;
  p.set_value(std::move(status));
  return p.get_future();
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Copies sequences [first, first + count) of a batch's outputs.
InferResult Slice(const BatchOutputs& all, const RaggedBatch& batch, int first, int count,
                  bool keep_hidden) {
  InferResult r;
  const int tok_begin = batch.cu_seqlens[first];
  const int tok_end = batch.cu_seqlens[first + count];
  for (int s = first; s < first + count; ++s)
    r.cu_seqlens.push_back(batch.cu_seqlens[s + 1] - tok_begin);
  for (const NamedOutput& o : all.outputs) {
    // A request that did not ask for the hidden states shares a batch with one that did.
    if (o.name == kLastHiddenState && !keep_hidden) continue;
    NamedOutput mine{o.name, o.per_token, o.width, {}};
    const size_t begin = static_cast<size_t>(o.per_token ? tok_begin : first) * o.width;
    const size_t end = static_cast<size_t>(o.per_token ? tok_end : first + count) * o.width;
    mine.data.assign(o.data.begin() + begin, o.data.begin() + end);
    r.outputs.outputs.push_back(std::move(mine));
  }
  return r;
}

// A split request's result: its parts' outputs (each its sequences in
// order) joined in part order. Its compute time is its parts' (the engine
// spent them all on it); its queue time the rest of its `seconds` in the
// scheduler. (A part is queued once the one before it is taken, so it waits
// while that one computes: its own queue time overlaps the compute before it,
// and the parts' queue times do not add up to the request's.)
InferResult Join(std::vector<InferResult>& parts, double seconds) {
  InferResult r = std::move(parts.front());
  for (size_t i = 1; i < parts.size(); ++i) {
    InferResult& part = parts[i];
    const int tokens = r.cu_seqlens.back();
    for (size_t s = 1; s < part.cu_seqlens.size(); ++s)
      r.cu_seqlens.push_back(tokens + part.cu_seqlens[s]);
    for (size_t o = 0; o < r.outputs.outputs.size(); ++o) {
      std::vector<float>& data = r.outputs.outputs[o].data;
      const std::vector<float>& more = part.outputs.outputs[o].data;
      data.insert(data.end(), more.begin(), more.end());
    }
    r.compute_seconds += part.compute_seconds;
    r.batch_requests = std::max(r.batch_requests, part.batch_requests);
  }
  r.queue_seconds = std::max(0.0, seconds - r.compute_seconds);
  return r;
}

}  // namespace

Scheduler::Scheduler(std::vector<std::unique_ptr<Engine>> engines, SchedulerOptions options)
    : engines_(std::move(engines)), options_(std::move(options)) {
  for (size_t i = 0; i < engines_.size(); ++i)
    workers_.emplace_back([this, i] {
      NameThisThread("batcher");
      WorkerLoop(static_cast<int>(i));
    });
}

Scheduler::~Scheduler() { Shutdown(); }

void Scheduler::Shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
}

void Scheduler::CancelQueued(const Status& why) {
  std::deque<PendingPtr> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
    queued_tokens_ = 0;
    queued_seqs_ = 0;
  }
  cv_.notify_all();
  for (PendingPtr& p : dropped) Finish(*p, why);
}

std::vector<std::pair<std::string, size_t>> Scheduler::EngineMemory() const {
  std::vector<std::pair<std::string, size_t>> out;
  for (const auto& e : engines_) out.emplace_back(e->device(), e->PeakMemoryBytes());
  return out;
}

size_t Scheduler::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

Status SchedulerOptions::CheckClientBatch(size_t inputs) const {
  const size_t limit = client_batch_limit();
  if (inputs <= limit) return Status::Ok();
  return OutOfRange(std::to_string(inputs) +
                    " inputs in one request, more than max_client_batch_size " +
                    std::to_string(limit) +
                    " (the server's --max-client-batch-size, else --max-batch-size or "
                    "config.pbtxt's max_batch_size): split them over several requests");
}

std::vector<int> Scheduler::PartCuts(const InferRequest& request) const {
  std::vector<int> cuts{0};
  int tokens = 0;
  for (size_t i = 0; i < request.sequences.size(); ++i) {
    const int n = static_cast<int>(request.sequences[i].input_ids.size());
    const int in_part = static_cast<int>(i) - cuts.back();
    if (in_part > 0 &&
        (in_part >= options_.max_batch_size || tokens + n > options_.max_batch_tokens)) {
      cuts.push_back(static_cast<int>(i));
      tokens = 0;
    }
    tokens += n;
  }
  cuts.push_back(static_cast<int>(request.sequences.size()));
  return cuts;
}

Scheduler::PendingPtr Scheduler::MakePart(const std::shared_ptr<Job>& job, int part) {
  auto p = std::make_unique<Pending>();
  p->job = job;
  p->part = part;
  p->first = job->cuts[part];
  p->count = job->cuts[part + 1] - p->first;
  for (int i = p->first; i < p->first + p->count; ++i) {
    const int n = static_cast<int>(job->request.sequences[i].input_ids.size());
    p->tokens += n;
    p->max_len = std::max(p->max_len, n);
  }
  p->enqueued = Clock::now();
  return p;
}

void Scheduler::Finish(const Pending& p, StatusOr<InferResult> result) {
  Job& job = *p.job;
  std::lock_guard lock(job.mu);
  if (job.finished) return;  // an earlier part failed: the request has its answer
  if (!result.ok() || job.parts() == 1) {
    job.finished = true;
    job.promise.set_value(std::move(result));
    return;
  }
  job.results[p.part] = std::move(*result);
  if (--job.remaining > 0) return;
  job.finished = true;
  job.promise.set_value(Join(job.results, Seconds(Clock::now() - job.submitted)));
}

std::future<StatusOr<InferResult>> Scheduler::Submit(InferRequest request) {
  if (request.sequences.empty()) return Ready(InvalidArgument("request has no sequences"));
  if (Status st = options_.CheckClientBatch(request.sequences.size()); !st.ok()) return Ready(st);
  // Checked per request so that one bad request never fails a whole batch.
  RaggedBatch check;
  for (const SequenceInput& s : request.sequences)
    check.Add(s.input_ids, s.token_type_ids, s.pool_start);
  if (Status st = ValidateBatch(check, config()); !st.ok()) return Ready(st);

  auto job = std::make_shared<Job>();
  job->submitted = Clock::now();
  job->cuts = PartCuts(request);
  job->request = std::move(request);
  job->remaining = job->parts();
  job->results.resize(job->parts());
  auto future = job->promise.get_future();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Ready(Unavailable("the server is shutting down"));
    if (queue_.size() >= options_.max_queue_size)
      return Ready(ResourceExhausted("queue full (" + std::to_string(options_.max_queue_size) +
                                     " requests waiting); retry later"));
    // Only the first part: TakeBatch queues each next one.
    PendingPtr first = MakePart(job, 0);
    queued_tokens_ += first->tokens;
    queued_seqs_ += first->count;
    queue_.push_back(std::move(first));
  }
  cv_.notify_all();
  return future;
}

bool Scheduler::QueueFillsBatch() const {
  const auto& preferred = options_.preferred_batch_sizes;
  return queued_tokens_ >= options_.max_batch_tokens || queued_seqs_ >= options_.max_batch_size ||
         (!preferred.empty() && queued_seqs_ >= preferred.front());
}

bool Scheduler::WaitForWork(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return false;  // stopping and drained
    if (stopping_ || QueueFillsBatch()) return true;
    const auto deadline = queue_.front()->enqueued + options_.max_queue_delay;
    if (Clock::now() >= deadline) return true;
    cv_.wait_until(lock, deadline);
    // Another worker may have taken the queue meanwhile: start over.
    if (!queue_.empty() && Clock::now() >= queue_.front()->enqueued + options_.max_queue_delay)
      return true;
  }
}

void Scheduler::TakeExpired(std::vector<PendingPtr>& dropped) {
  const auto now = Clock::now();
  const bool has_timeout = options_.request_timeout.count() > 0;
  std::deque<PendingPtr> keep;
  for (PendingPtr& p : queue_) {
    const InferRequest& request = p->job->request;
    const bool timed_out = has_timeout && now - p->enqueued >= options_.request_timeout;
    const bool cancelled = request.is_cancelled && request.is_cancelled();
    const bool failed = p->job->finished;  // another part failed
    if (!timed_out && !cancelled && !failed) {
      keep.push_back(std::move(p));
      continue;
    }
    queued_tokens_ -= p->tokens;
    queued_seqs_ -= p->count;
    Finish(*p, timed_out ? DeadlineExceeded("request timed out after " +
                                            std::to_string(options_.request_timeout.count()) +
                                            " ms in the queue")
                         : Unavailable("request cancelled by the client"));
    dropped.push_back(std::move(p));
  }
  queue_ = std::move(keep);
}

std::vector<Scheduler::PendingPtr> Scheduler::TakeBatch() {
  std::vector<PendingPtr> batch;
  if (queue_.empty()) return batch;
  const int head_len = queue_.front()->max_len;
  const bool normalize = queue_.front()->job->request.run.normalize;
  std::vector<size_t> order(queue_.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable: among equal distances the older request goes first.
  std::stable_sort(order.begin() + 1, order.end(), [&](size_t a, size_t b) {
    return std::abs(queue_[a]->max_len - head_len) < std::abs(queue_[b]->max_len - head_len);
  });
  // With preferred sizes, the largest one the queue fills caps the batch.
  int max_seqs = options_.max_batch_size;
  for (int size : options_.preferred_batch_sizes)
    if (size <= queued_seqs_) max_seqs = std::min(options_.max_batch_size, size);
  int tokens = 0, seqs = 0;
  for (size_t i : order) {
    const Pending& p = *queue_[i];
    const int n = p.count;
    // The head always goes, even alone over the budgets; what runs with
    // another RunOptions::normalize waits for a batch of its own.
    if (!batch.empty() && (tokens + p.tokens > options_.max_batch_tokens || seqs + n > max_seqs ||
                           p.job->request.run.normalize != normalize))
      continue;
    tokens += p.tokens;
    seqs += n;
    batch.push_back(std::move(queue_[i]));
  }
  queued_tokens_ -= tokens;
  queued_seqs_ -= seqs;
  std::erase_if(queue_, [](const PendingPtr& p) { return p == nullptr; });
  // A split request's next part waits behind what is queued now.
  for (const PendingPtr& p : batch) {
    Job& job = *p->job;
    if (job.next_part >= job.parts() || job.finished) continue;
    PendingPtr next = MakePart(p->job, job.next_part++);
    queued_tokens_ += next->tokens;
    queued_seqs_ += next->count;
    queue_.push_back(std::move(next));
  }
  return batch;
}

void Scheduler::WorkerLoop(int instance) {
  for (;;) {
    std::vector<PendingPtr> batch, dropped;
    {
      std::unique_lock lock(mu_);
      if (!WaitForWork(lock)) return;
      TakeExpired(dropped);
      batch = TakeBatch();
    }
    // More may be waiting than this batch took: let another worker look.
    cv_.notify_all();
    if (!batch.empty()) RunBatch(instance, batch);
  }
}

void Scheduler::RunBatch(int instance, std::vector<PendingPtr>& batch) {
  const auto start = Clock::now();
  RaggedBatch ragged;
  RunOptions run_options;
  for (const PendingPtr& p : batch) {
    const InferRequest& request = p->job->request;
    for (int i = p->first; i < p->first + p->count; ++i) {
      const SequenceInput& s = request.sequences[i];
      ragged.Add(s.input_ids, s.token_type_ids, s.pool_start);
    }
    run_options.last_hidden_state |= request.run.last_hidden_state;
    run_options.normalize = request.run.normalize;  // the same in the batch (TakeBatch)
  }
  auto outputs = engines_[instance]->Run(ragged, run_options);
  const double compute = Seconds(Clock::now() - start);
  if (options_.on_batch)
    options_.on_batch({static_cast<int>(batch.size()), ragged.num_seqs(), ragged.num_tokens(),
                       compute, outputs.ok(), instance});
  int first = 0;
  for (PendingPtr& p : batch) {
    if (!outputs.ok()) {
      Finish(*p, outputs.status());
      continue;
    }
    InferResult r = Slice(*outputs, ragged, first, p->count, p->job->request.run.last_hidden_state);
    r.queue_seconds = Seconds(start - p->enqueued);
    r.compute_seconds = compute;
    r.batch_requests = static_cast<int>(batch.size());
    Finish(*p, std::move(r));
    first += p->count;
  }
}

}  // namespace bertrt

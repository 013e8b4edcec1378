#include "server/http/handler_pool.h"

#include <algorithm>
#include <thread>

namespace bertrt::server {

HandlerPool::HandlerPool(size_t min_threads, size_t max_threads,
                         std::chrono::milliseconds idle_exit)
    : min_(std::max<size_t>(min_threads, 1)),
      max_(std::max(max_threads, std::max<size_t>(min_threads, 1))),
      idle_exit_(idle_exit) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < min_; ++i) Start();
}

HandlerPool::~HandlerPool() { shutdown(); }

void HandlerPool::Start() {
  ++threads_;
  ++idle_;
  // Detached: a thread above min ends on its own; shutdown() waits for the
  // count to reach 0 instead of joining.
  std::thread([this] { Work(); }).detach();
}

void HandlerPool::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  jobs_.push_back(std::move(fn));
  // A thread counted idle may already be on its way to a job queued before
  // this one: only jobs beyond the idle threads need a new one.
  if (jobs_.size() > idle_ && threads_ < max_) Start();
  work_cv_.notify_one();
}

void HandlerPool::Work() {
  std::unique_lock lock(mu_);
  for (;;) {
    const bool woke =
        work_cv_.wait_for(lock, idle_exit_, [&] { return shutdown_ || !jobs_.empty(); });
    if (jobs_.empty()) {
      if (shutdown_ || (!woke && threads_ > min_)) break;  // else: a min thread waits on
      continue;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    --idle_;
    lock.unlock();
    job();
    lock.lock();
    ++idle_;
  }
  --idle_;
  --threads_;
  done_cv_.notify_all();
}

void HandlerPool::shutdown() {
  std::unique_lock lock(mu_);
  shutdown_ = true;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return threads_ == 0; });
}

size_t HandlerPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_;
}

}  // namespace bertrt::server

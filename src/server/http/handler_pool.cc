#include "server/http/handler_pool.h"

#include <algorithm>
#include <utility>

#include "core/thread_name.h"

namespace bertrt::server {

HandlerPool::HandlerPool(std::string name, size_t min_threads, size_t max_threads,
                         std::chrono::milliseconds idle_exit)
    : name_(std::move(name)),
      min_(std::max<size_t>(min_threads, 1)),
      max_(std::max(max_threads, std::max<size_t>(min_threads, 1))),
      idle_exit_(idle_exit) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < min_; ++i) Start();
}

HandlerPool::~HandlerPool() { shutdown(); }

void HandlerPool::Start() {
  JoinEnded();
  ++idle_;
  std::thread worker([this] {
    NameThisThread(name_);
    Work();
  });
  const std::thread::id id = worker.get_id();
  workers_.emplace(id, std::move(worker));
}

void HandlerPool::JoinEnded() {
  // An ended thread listed itself under mu_, which the caller now holds, so
  // all it has left to do is return.
  for (std::thread::id id : ended_) {
    auto it = workers_.find(id);
    it->second.join();
    workers_.erase(it);
  }
  ended_.clear();
}

void HandlerPool::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  jobs_.push_back(std::move(fn));
  // A thread counted idle may already be on its way to a job queued before
  // this one: only jobs beyond the idle threads need a new one.
  if (jobs_.size() > idle_ && Running() < max_) Start();
  work_cv_.notify_one();
}

void HandlerPool::Work() {
  std::unique_lock lock(mu_);
  for (;;) {
    const bool woke =
        work_cv_.wait_for(lock, idle_exit_, [&] { return shutdown_ || !jobs_.empty(); });
    if (jobs_.empty()) {
      if (shutdown_ || (!woke && Running() > min_)) break;  // else: a min thread waits on
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
  ended_.push_back(std::this_thread::get_id());
  done_cv_.notify_all();
}

void HandlerPool::shutdown() {
  std::unique_lock lock(mu_);
  shutdown_ = true;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return Running() == 0; });
  JoinEnded();
}

size_t HandlerPool::threads() const {
  std::lock_guard lock(mu_);
  return Running();
}

}  // namespace bertrt::server

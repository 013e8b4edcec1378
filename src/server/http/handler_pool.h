// The HTTP server's handler threads: a handler blocks on the batcher until its
// request is computed, so each request in flight holds a thread. This pool
// keeps `min` threads ready and starts another whenever a request arrives with
// none idle, up to `max` (then requests wait for one); threads above `min`
// end after `idle_exit` without work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace bertrt::server {

class HandlerPool {
 public:
  // min_threads is at least 1, and a max_threads below it is taken as
  // min_threads: callers that take both from a user reject that case with
  // an error first (`bertrt serve`'s --http-max-threads).
  // `name`: its threads' name (NameThisThread).
  HandlerPool(std::string name, size_t min_threads, size_t max_threads,
              std::chrono::milliseconds idle_exit = std::chrono::seconds(30));
  ~HandlerPool();
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Runs fn on an idle thread, a new one if none is idle and fewer than
  // max run; else fn waits for the first thread to come free.
  void enqueue(std::function<void()> fn);
  // Runs what is queued, then ends every thread.
  void shutdown();

  // For tests and logs.
  size_t threads() const;

 private:
  void Start();  // with mu_ held
  void Work();
  void JoinEnded();  // with mu_ held
  // Threads started and not yet ended, with mu_ held.
  size_t Running() const { return workers_.size() - ended_.size(); }

  const std::string name_;
  const size_t min_, max_;
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a job, or the shutdown
  std::condition_variable done_cv_;  // a thread ended
  std::deque<std::function<void()>> jobs_;
  // Every thread is joined, so none touches the pool after it is destroyed:
  // one that ends above min lists itself in ended_, and the next Start() or
  // shutdown() joins it.
  std::map<std::thread::id, std::thread> workers_;
  std::vector<std::thread::id> ended_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

}  // namespace bertrt::server

// The HTTP server's connection threads: httplib runs each accepted connection
// on a task queue thread for as long as the connection lives, idle keep-alive
// waits included (up to its keep-alive timeout, 5 s). With httplib's fixed
// ThreadPool, as many idle kept-alive connections as threads made every new
// client wait up to 5 s for one to time out (measured: 4 threads, 4 idle
// connections, a new request answered after 5.0 s). This pool keeps `min`
// threads ready and starts another whenever a connection arrives with none
// idle, up to `max`; threads above `min` end after `idle_exit` without work.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace bertrt::server {

class HandlerPool : public httplib::TaskQueue {
 public:
  // min_threads is at least 1, and a max_threads below it is taken as
  // min_threads: callers that take both from a user reject that case with
  // an error first (`bertrt serve`'s --http-max-threads).
  HandlerPool(size_t min_threads, size_t max_threads,
              std::chrono::milliseconds idle_exit = std::chrono::seconds(30));
  ~HandlerPool() override;

  // Runs fn on an idle thread, a new one if none is idle and fewer than
  // max run; else fn waits for the first thread to come free.
  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then ends every thread (httplib calls it once the
  // listener stops).
  void shutdown() override;

  // For tests and logs.
  size_t threads() const;

 private:
  void Start();  // with mu_ held
  void Work();
  void JoinEnded();  // with mu_ held
  // Threads started and not yet ended, with mu_ held.
  size_t Running() const { return workers_.size() - ended_.size(); }

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

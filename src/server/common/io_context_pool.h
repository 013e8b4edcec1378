// The front ends' I/O threads (HttpServer, GrpcTransport): each runs an
// io_context of its own, and a connection stays on the one it was accepted
// onto, so its steps run on one thread, in order, without a strand, and an
// answer posted back wakes that thread alone. With one io_context shared by
// all I/O threads, each event could wake another thread: on a 16-core GPU
// machine 8 of them took twice the CPU per request of 2 (issue 50).
#pragma once

// clang-format off
#include <utility>  // ahead of Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_name.h"

namespace bertrt::server {

class IoContextPool {
 public:
  explicit IoContextPool(int threads) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      contexts_.push_back(std::make_unique<boost::asio::io_context>(/*concurrency_hint=*/1));
      // Each runs until Release(), connections or not.
      keep_running_.push_back(boost::asio::make_work_guard(*contexts_.back()));
    }
  }

  // Where the acceptor and the server-wide timers live.
  boost::asio::io_context& first() { return *contexts_.front(); }
  // The next accepted connection's, round robin; called from the acceptor's thread.
  boost::asio::io_context& next() { return *contexts_[next_++ % contexts_.size()]; }

  // Starts one thread per io_context, named `thread_name`.
  std::vector<std::thread> Run(const std::string& thread_name) {
    std::vector<std::thread> threads;
    for (auto& context : contexts_)
      threads.emplace_back([&context = *context, thread_name] {
        NameThisThread(thread_name);
        context.run();
      });
    return threads;
  }

  // From here each thread returns once its connections and timers are done.
  void Release() {
    for (auto& guard : keep_running_) guard.reset();
  }

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      keep_running_;
  size_t next_ = 0;
};

}  // namespace bertrt::server

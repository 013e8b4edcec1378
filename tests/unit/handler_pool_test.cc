#include "server/http/handler_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace bertrt::server {
namespace {

using namespace std::chrono_literals;

// Jobs that run until released, counting how many run at once.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> running{0}, done{0};
  std::function<void()> Job() {
    return [this] {
      ++running;
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return open; });
      --running;
      ++done;
    };
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

// Polls `condition` for up to 5 s.
template <typename F>
bool Eventually(F condition) {
  for (int i = 0; i < 500; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

TEST(HandlerPool, StartsAThreadWhenNoneIsIdle) {
  HandlerPool pool("test-handler", 1, 8);
  Gate gate;
  for (int i = 0; i < 5; ++i) pool.enqueue(gate.Job());
  // Five connections held at once (idle keep-alive waits, say): five threads.
  EXPECT_TRUE(Eventually([&] { return gate.running.load() == 5; }));
  EXPECT_EQ(pool.threads(), 5u);
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return gate.done.load() == 5; }));
}

TEST(HandlerPool, ThreadsCarryThePoolsName) {
  // Names longer than Linux keeps (15 bytes) are cut, not refused.
  HandlerPool pool("a-pool-name-longer-than-15", 1, 2);
  std::mutex mu;
  std::condition_variable cv;
  std::string seen;
  pool.enqueue([&] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    std::lock_guard lock(mu);
    seen = name;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return !seen.empty(); }));
  EXPECT_EQ(seen, "a-pool-name-lon");
}

TEST(HandlerPool, MaxBoundsTheThreadsAndLaterJobsWait) {
  HandlerPool pool("test-handler", 1, 2);
  Gate gate;
  for (int i = 0; i < 3; ++i) pool.enqueue(gate.Job());
  EXPECT_TRUE(Eventually([&] { return gate.running.load() == 2; }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(gate.running.load(), 2);  // the third waits
  EXPECT_EQ(pool.threads(), 2u);
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return gate.done.load() == 3; }));
}

TEST(HandlerPool, ThreadsAboveMinEndWhenIdle) {
  HandlerPool pool("test-handler", 2, 16, 50ms);
  Gate gate;
  for (int i = 0; i < 6; ++i) pool.enqueue(gate.Job());
  EXPECT_TRUE(Eventually([&] { return pool.threads() == 6; }));
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return pool.threads() == 2; }));
  // And it grows again.
  Gate again;
  for (int i = 0; i < 4; ++i) pool.enqueue(again.Job());
  EXPECT_TRUE(Eventually([&] { return again.running.load() == 4; }));
  again.Open();
}

TEST(HandlerPool, ShutdownRunsQueuedJobsThenEndsEveryThread) {
  std::atomic<int> ran{0};
  {
    HandlerPool pool("test-handler", 1, 1);
    for (int i = 0; i < 20; ++i)
      pool.enqueue([&] {
        std::this_thread::sleep_for(1ms);
        ++ran;
      });
    pool.shutdown();
    EXPECT_EQ(pool.threads(), 0u);
  }
  EXPECT_EQ(ran.load(), 20);
}

}  // namespace
}  // namespace bertrt::server

// Per HTTP/2 connection: how many calls the client cancelled before their
// answer ended, weighed against time and against the calls it let finish. A
// cancel costs the client one frame and the server a call's set-up (and, for a
// call whose message was whole, its handler): the 2023 "rapid reset" (HEADERS
// then RST_STREAM, CVE-2023-44487) and the 2025 "MadeYouReset" (frames that
// make the server reset the stream itself, CVE-2025-8671) both cost nothing
// to send and everything to serve.
#pragma once

#include <chrono>
#include <cstdint>

namespace bertrt::server {

using GrpcClock = std::chrono::steady_clock;

// The window over which cancels are weighed against completed calls.
inline constexpr auto kResetWindow = std::chrono::seconds(10);

// A client abuses its connection when it cancels more than `per_second` calls
// a second (beyond a burst of as many), or `per_second` more calls than it let
// finish within kResetWindow.
class ResetAccount {
 public:
  explicit ResetAccount(uint32_t per_second);
  // False once a limit is crossed.
  bool OnReset(GrpcClock::time_point now);
  void OnCompleted(GrpcClock::time_point now);

 private:
  void Roll(GrpcClock::time_point now);

  const double per_second_;
  double tokens_;
  GrpcClock::time_point refilled_{}, window_start_{};
  uint64_t resets_ = 0, completed_ = 0;  // in the current window
};

}  // namespace bertrt::server

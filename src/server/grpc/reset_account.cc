#include "server/grpc/reset_account.h"

#include <algorithm>

namespace bertrt::server {

ResetAccount::ResetAccount(uint32_t per_second)
    : per_second_(std::max<uint32_t>(per_second, 1)), tokens_(per_second_) {}

void ResetAccount::Roll(GrpcClock::time_point now) {
  if (now - window_start_ < kResetWindow) return;
  window_start_ = now;
  resets_ = completed_ = 0;
}

bool ResetAccount::OnReset(GrpcClock::time_point now) {
  Roll(now);
  const double elapsed = std::chrono::duration<double>(now - refilled_).count();
  tokens_ = std::min(per_second_, tokens_ + elapsed * per_second_);
  refilled_ = now;
  ++resets_;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return resets_ <= completed_ + static_cast<uint64_t>(per_second_);
}

void ResetAccount::OnCompleted(GrpcClock::time_point now) {
  Roll(now);
  ++completed_;
}

}  // namespace bertrt::server

#include "server/common/request_log.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>

namespace bertrt::server {

std::string RequestId(const std::string& from_client) {
  if (!from_client.empty() && from_client.size() <= 128) return from_client;
  static const uint32_t prefix = std::random_device{}();
  static std::atomic<uint32_t> counter{0};
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", prefix, counter.fetch_add(1) + 1);
  return buf;
}

std::string UtcNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf) + "." + std::to_string(1000 + ms).substr(1) + "Z";
}

namespace {
bool LowerHex(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}
}  // namespace

void AddTraceContext(nlohmann::json& line, const std::string& traceparent) {
  const std::string_view t = traceparent;
  // version "00" is exactly 55 chars; a later version may append fields after a dash.
  if (t.size() < 55 || t[2] != '-' || t[35] != '-' || t[52] != '-') return;
  if (t.size() > 55 && (t.substr(0, 2) == "00" || t[55] != '-')) return;
  const std::string_view version = t.substr(0, 2), trace = t.substr(3, 32),
                         parent = t.substr(36, 16), flags = t.substr(53, 2);
  if (!LowerHex(version) || version == "ff" || !LowerHex(trace) || !LowerHex(parent) ||
      !LowerHex(flags))
    return;
  if (trace == std::string(32, '0') || parent == std::string(16, '0')) return;
  line["trace_id"] = std::string(trace);
  line["parent_id"] = std::string(parent);
}

void LogRequest(nlohmann::json line, std::chrono::steady_clock::time_point start) {
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  line["latency_ms"] = std::round(ms * 1000) / 1000;
  line["ts"] = UtcNow();
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fputs(text.c_str(), stderr);  // one write: lines of concurrent requests do not interleave
}

}  // namespace bertrt::server

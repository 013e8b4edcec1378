#include "core/startup_trace.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace bertrt {
namespace {

// The process's start time on CLOCK_BOOTTIME (the clock /proc/self/stat's
// start time is counted on), in seconds; -1 when unknown.
double ProcessStartSeconds() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Field 22, counted after the command name's closing parenthesis (the name
  // may hold spaces).
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  const char* p = text.c_str() + close + 2;
  for (int field = 3; field < 22 && *p; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return -1;
    ++p;
  }
  return static_cast<double>(std::strtoull(p, nullptr, 10)) / sysconf(_SC_CLK_TCK);
}

}  // namespace

void TraceStartup(const char* what) {
  static const bool enabled = [] {
    const char* v = std::getenv("BERTRT_TRACE_STARTUP");
    return v && std::string(v) == "1";
  }();
  if (!enabled) return;
  static const double start = ProcessStartSeconds();
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const double ms = (now.tv_sec + now.tv_nsec * 1e-9 - start) * 1e3;
  std::fprintf(stderr, "[startup +%.1f ms] %s\n", ms, what);
}

}  // namespace bertrt

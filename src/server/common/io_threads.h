// How many threads read, parse and write the connections of a front end
// (HTTP, gRPC) by default: half the machine's cores, at least 2 and at most
// 8. Two served a 16-core GPU machine's short requests one after another:
// with 8, 1-text requests at 64 clients went from 48k to 54k a second
// (bench/RESULTS.md, issue 50); an I/O thread waiting for work costs nothing.
#pragma once

#include <algorithm>
#include <thread>

namespace bertrt::server {

inline int DefaultIoThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2, 2, 8);
}

}  // namespace bertrt::server

// Names the calling thread, as `top -H`, `ps -L`, gdb, perf and
// /proc/PID/task/TID/comm show it: the server's threads by job (http-io,
// http-handler, grpc-io, grpc-handler, batcher, ...), so that a profile can
// say which job spends the CPU (bench/served_profile.py reads them).
#pragma once

#include <pthread.h>

#include <string>

namespace bertrt {

// Linux keeps 15 bytes of a thread's name: a longer one is cut.
inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace bertrt

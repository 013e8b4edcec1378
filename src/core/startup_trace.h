// With BERTRT_TRACE_STARTUP=1 in the environment, prints to stderr the
// milliseconds from the process's start to each step of getting a model
// ready to serve (model read, CUDA context, cuBLASLt opened, weights on the
// GPU, first result), so that a slow cold start shows where it goes.
#pragma once

namespace bertrt {

// "[startup +T ms] what"; nothing unless BERTRT_TRACE_STARTUP=1. Thread-safe.
void TraceStartup(const char* what);

}  // namespace bertrt

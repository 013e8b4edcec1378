// Request ids and the access log both front ends write: one JSON line per
// request on stderr, so that a client's X-Request-Id (HTTP header, or gRPC
// metadata x-request-id) can be found in the server's log, and a traced
// request's W3C trace context (traceparent) joins its trace.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace bertrt::server {

// The client's id when it gave a usable one (1..128 characters), else a new
// one: 16 hex digits, a per-process random prefix and a counter.
std::string RequestId(const std::string& from_client);

// ISO 8601 UTC with milliseconds, e.g. 2026-11-29T20:54:12.345Z.
std::string UtcNow();

// The trace a W3C `traceparent` value names ("00-<32 hex trace id>-<16 hex
// parent id>-<2 hex flags>"), added to a log line as "trace_id" and
// "parent_id"; nothing for a missing or malformed one (as the W3C Trace
// Context spec says a receiver ignores it).
void AddTraceContext(nlohmann::json& line, const std::string& traceparent);

// Writes `line` plus "ts" and "latency_ms" (since `start`, to the
// microsecond) as one line on stderr; invalid UTF-8 from a client is
// replaced, never thrown on.
void LogRequest(nlohmann::json line, std::chrono::steady_clock::time_point start);

}  // namespace bertrt::server

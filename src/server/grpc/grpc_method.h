// What the gRPC transport (grpc_session.h, grpc_transport.h) and the services
// (KServe inference, grpc.health.v1) share: a method is a function from one
// serialized request message to a reply, and the transport decides how calls
// reach it (unary, one answer per message of a stream, or a watch polled
// until the client goes). Services never see HTTP/2; the transport never sees
// protobuf.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace bertrt::server {

// gRPC's status codes (grpc/include/grpc/status.h), as sent in grpc-status.
enum class GrpcCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// A handler's answer: on kOk the serialized response message, else the status
// and its message (which the client sees).
struct GrpcReply {
  GrpcCode code = GrpcCode::kOk;
  std::string message;
  std::string body;

  static GrpcReply Ok(std::string body) { return {GrpcCode::kOk, "", std::move(body)}; }
  static GrpcReply Error(GrpcCode code, std::string message) {
    return {code, std::move(message), ""};
  }
  bool ok() const { return code == GrpcCode::kOk; }
};

// What a handler knows of its call, from the request's headers.
struct GrpcCallInfo {
  std::string path;           // "/inference.GRPCInferenceService/ModelInfer"
  std::string authorization;  // the metadata's value ("Bearer <key>"), for the API key
  std::string request_id;     // x-request-id; "" when the client sent none
  std::string traceparent;    // W3C trace context; "" when none
  std::string peer;           // "ipv4:127.0.0.1:5555", as gRPC writes peers
  // Set once the client resets the stream, its connection closes or the
  // call's deadline (grpc-timeout) passes: the scheduler then drops the
  // request instead of computing it.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);

  bool is_cancelled() const { return cancelled->load(std::memory_order_relaxed); }
};

struct GrpcMethod {
  enum class Kind {
    kUnary,       // one request, one answer
    kBidiStream,  // each request message answered in order, one at a time
    kWatch,       // one request; `handle` runs again every kWatchInterval and
                  // its answer is sent whenever it differs from the last one
  };
  Kind kind = Kind::kUnary;
  // Run on the connection's I/O thread: handlers that take no lock for long
  // and never reach the batcher (health probes stay answered while every
  // handler thread waits on a busy model). Otherwise: the handler pool.
  bool on_io_thread = false;
  // Checked on the I/O thread when the call's headers arrive, before any of
  // its message is read: a reply here (UNAUTHENTICATED) ends the call.
  std::function<std::optional<GrpcReply>(const GrpcCallInfo&)> admit;
  std::function<GrpcReply(const GrpcCallInfo&, const std::string& request)> handle;
};

// The methods a server offers, by HTTP/2 path ("/package.Service/Method").
using GrpcMethodLookup = std::function<const GrpcMethod*(std::string_view path)>;

}  // namespace bertrt::server

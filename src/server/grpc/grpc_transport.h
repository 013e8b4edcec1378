// The gRPC front end's sockets: HTTP/2 (nghttp2, through GrpcSession) over
// Boost.Asio, in plaintext or TLS with ALPN "h2". A few I/O threads read,
// frame and write every connection without blocking, so an open connection or
// an idle call costs no thread; handlers that compute run on a HandlerPool
// (they block on the batcher) and their replies come back to the connection's
// I/O thread. Graceful stop: GOAWAY on every connection, calls in flight finish,
// what is still open when the grace ends is cut.
#pragma once

#include <chrono>
#include <memory>

#include "bertrt/status.h"
#include "server/grpc/grpc_method.h"
#include "server/grpc/grpc_options.h"

namespace bertrt::server {

class GrpcTransport {
 public:
  GrpcTransport(const GrpcOptions& options, GrpcMethodLookup methods);
  ~GrpcTransport();

  // Binds and starts serving on I/O threads of its own; Unavailable when the
  // address cannot be bound, InvalidArgument when TLS cannot be set up.
  Status Start();
  // Stops accepting and sends GOAWAY; calls still open after `grace` are cut
  // (their handlers see is_cancelled). Returns at once; safe from any thread.
  void Stop(std::chrono::milliseconds grace);
  // Returns once every connection has closed and every handler returned.
  void Wait();

  struct Impl;  // the listener and the connections (grpc_transport.cc)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace bertrt::server

// The gRPC front end's settings and limits, one struct read by the server,
// its connections and each connection's HTTP/2 session. Every limit that a
// client's behaviour can run into is here (or a named constant beside the code
// that enforces it), with the `bertrt serve` flag that sets it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/common/tls.h"

namespace bertrt::server {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 8001;
  // --max-payload-bytes: a message that declares more is refused with
  // RESOURCE_EXHAUSTED before any of it is buffered (and so is one that
  // inflates to more).
  size_t max_message_bytes = 8 << 20;
  // When non-empty, every RPC but ServerLive, ServerReady and the health
  // service's server-wide check needs the metadata
  // `authorization: Bearer <api_key>`; otherwise UNAUTHENTICATED.
  std::string api_key;
  // PEM certificate and key: TLS (ALPN h2) instead of plaintext.
  TlsPem tls;
  // One JSON line per ModelInfer / stream request on stderr (request id from
  // the client's x-request-id metadata, else one made here for the log).
  bool log_requests = false;

  // Handlers that compute block on the batcher, each on a thread (HandlerPool):
  // `handler_threads` kept ready, more on demand up to --grpc-max-threads
  // (calls beyond wait for one). An open stream holds no thread while it
  // waits for its client.
  int handler_threads = 8;
  int max_threads = 256;
  // Threads that read, write and frame the connections, each with the
  // connections it accepted (see HttpOptions::io_threads).
  int io_threads = 2;

  // --grpc-max-concurrent-streams: SETTINGS_MAX_CONCURRENT_STREAMS, the
  // calls one connection may have open at once (a client queues the rest).
  uint32_t max_concurrent_streams = 100;
  // --grpc-max-streams: calls open across all connections; beyond, a new call
  // gets RESOURCE_EXHAUSTED. Bounds what idle calls can hold in all.
  int max_streams = 16384;
  // --grpc-max-connections: connections open at once; beyond, a new one is
  // closed as soon as it is accepted.
  int max_connections = 4096;
  // --grpc-stream-idle-timeout: how long an open call may wait on its
  // client: for its next message (a stream's, or a unary call's only one),
  // then it ends with DEADLINE_EXCEEDED; or to take its answer, then the
  // answer is dropped and the stream reset. Watch calls, whose client has
  // nothing to send, wait for no message.
  std::chrono::milliseconds stream_idle_timeout{300000};
  // --grpc-max-resets-per-second: a connection whose client cancels calls
  // before their answer (RST_STREAM, or frames that make the server reset
  // them) faster than this, beyond a burst of as many, or cancels this many
  // more calls than it lets finish within kResetWindow, gets GOAWAY
  // ENHANCE_YOUR_CALM and is closed (HTTP/2 "rapid reset", "MadeYouReset").
  uint32_t max_resets_per_second = 100;
};

}  // namespace bertrt::server

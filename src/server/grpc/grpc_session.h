// One HTTP/2 connection's gRPC calls, over nghttp2 and without the socket:
// bytes in (Receive), bytes out (Send), handlers' replies back (Complete) and
// time (NextWake, Expire), all on the connection's one thread at a time. The
// connection (grpc_transport.cc) owns the socket, the timers and the threads;
// everything a client's bytes can make the server do is decided here, which
// is what makes it testable without sockets (tests/unit/grpc_session_test.cc).
// grpc_session.cc is the connection (nghttp2's callbacks, bytes, time),
// grpc_call.cc a call's life (its checks, messages and answers).
//
// Defences, each against a client that costs the server more than it pays:
// - a call holds no thread while it waits for its client: a handler runs only
//   once a whole message is in;
// - SETTINGS_MAX_CONCURRENT_STREAMS per connection, and a server-wide cap on
//   open calls (GrpcOptions::max_streams);
// - a timeout for a call that waits on its client: for its next message, or
//   to take its answer (stream_idle_timeout);
// - cancel accounting (ResetAccount): "rapid reset" and "made you reset" get
//   GOAWAY ENHANCE_YOUR_CALM and the connection closes;
// - the header list size (kMaxHeaderListBytes) and each message's declared
//   length, checked before anything is buffered;
// - answers waiting for a client that does not read hold back its next calls
//   (kMaxUnsentBytes), a stream's next message runs only once its last answer
//   left, and a client that does not read stops being read (Backlogged).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bertrt/status.h"
#include "server/grpc/grpc_method.h"
#include "server/grpc/grpc_options.h"
#include "server/grpc/reset_account.h"

struct nghttp2_session;

namespace bertrt::server {

// How often a Watch call's handler runs again to look for a change.
inline constexpr auto kWatchInterval = std::chrono::seconds(1);
// A call's request headers, counted as HTTP/2 does (name + value + 32 each);
// advertised as SETTINGS_MAX_HEADER_LIST_SIZE. gRPC's own default limit.
inline constexpr size_t kMaxHeaderListBytes = 16 << 10;
// How long a new connection may take to send the HTTP/2 preface and SETTINGS.
inline constexpr auto kPrefaceTimeout = std::chrono::seconds(10);
// Answers computed and not yet taken by the client, per connection, beyond
// which its next calls wait to run.
inline constexpr size_t kMaxUnsentBytes = 16 << 20;

// A message for a handler: the connection runs it (on the handler pool, or on
// its I/O thread) and hands the reply to Complete.
struct GrpcWork {
  int32_t stream_id = 0;
  const GrpcMethod* method = nullptr;
  std::shared_ptr<const GrpcCallInfo> info;
  std::string request;
};

class GrpcSession {
 public:
  using Dispatch = std::function<void(GrpcWork)>;

  // `open_streams` counts calls across the server (against
  // options.max_streams); `peer` is given to handlers as GrpcCallInfo::peer.
  GrpcSession(const GrpcOptions& options, GrpcMethodLookup methods, Dispatch dispatch,
              std::atomic<int>& open_streams, std::string peer);
  ~GrpcSession();  // cancels the calls still open
  GrpcSession(const GrpcSession&) = delete;
  GrpcSession& operator=(const GrpcSession&) = delete;

  // Queues the server's SETTINGS; an error means the connection cannot go on.
  Status Start();
  // The client's bytes. An error (not HTTP/2, a flood nghttp2 refuses) means
  // the connection is to be closed.
  Status Receive(const uint8_t* data, size_t size);
  // Appends what is ready to go to the client to `out`, about `max_bytes`
  // at most.
  Status Send(std::string& out, size_t max_bytes);
  // A handler's reply to GrpcWork for `stream_id` (ignored once that call has
  // ended: reset, timed out, or its connection closing).
  void Complete(int32_t stream_id, GrpcReply reply);

  // When Expire next has something to do (a deadline, a call waiting on its
  // client, a watch to poll, the preface), if ever.
  std::optional<GrpcClock::time_point> NextWake() const;
  void Expire(GrpcClock::time_point now);

  // Graceful stop: GOAWAY NO_ERROR; calls in flight finish, streams and
  // watches waiting for their client end with UNAVAILABLE.
  void Shutdown();

  // Whether the client's bytes are still wanted.
  bool WantsRead() const;
  // The client is not taking what is queued for it: stop reading it (a
  // client that does not read cannot then make more answers pile up).
  bool Backlogged() const;
  // Nothing left to read or write: the connection can close.
  bool Done() const;

 private:
  struct Stream;     // grpc_stream.h
  struct Callbacks;  // nghttp2's callbacks, which reach the members below

  Stream* Find(int32_t stream_id);
  // A call's life (grpc_call.cc).
  void OnRequestHeaders(Stream& s);
  void OnData(Stream& s, const uint8_t* data, size_t size);
  void OnRemoteClose(Stream& s);
  // Runs the stream's next message (or ends the stream) when it can.
  void Pump(Stream& s);
  void SendMessage(Stream& s, std::string_view body);
  // Ends the call with `reply`'s status (trailers-only when nothing was sent).
  void Finish(Stream& s, const GrpcReply& reply, int http_status = 200);
  // What nghttp2 sends of the stream's answer next (its data source).
  ssize_t ReadAnswer(Stream& s, uint8_t* buf, size_t length, uint32_t* flags);
  // Deadlines, timeouts and watch polls of one call.
  std::optional<GrpcClock::time_point> NextWake(const Stream& s) const;
  void Expire(Stream& s, GrpcClock::time_point now);
  bool WaitsForMessage(const Stream& s) const;
  void Consume(Stream& s, size_t bytes);
  // The connection's (grpc_session.cc): a call that ended before its answer
  // did counts against the client; GOAWAY ENHANCE_YOUR_CALM, then close.
  void OnCancelled();
  void Calm(const std::string& why);

  const GrpcOptions& options_;
  GrpcMethodLookup methods_;
  Dispatch dispatch_;
  std::atomic<int>& open_streams_;
  const std::string peer_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;
  // Streams to Pump after Send: their answer left, or the unsent answers
  // that held them back went.
  std::vector<int32_t> drained_, held_;
  size_t unsent_bytes_ = 0;
  ResetAccount resets_;
  GrpcClock::time_point preface_deadline_;
  bool got_settings_ = false;
  bool closing_ = false;  // GOAWAY with an error queued: close once it is sent
  bool shutting_down_ = false;
};

}  // namespace bertrt::server

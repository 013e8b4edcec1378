// One call's state inside GrpcSession, shared by its two halves only
// (grpc_session.cc: the connection; grpc_call.cc: a call's life).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "server/grpc/grpc_session.h"
#include "server/grpc/grpc_wire.h"

namespace bertrt::server {

// How a call waiting on its client ends when the server stops.
inline GrpcReply ShuttingDown() {
  return GrpcReply::Error(GrpcCode::kUnavailable, "the server is shutting down");
}

struct GrpcSession::Stream {
  Stream(int32_t stream_id, size_t max_message) : id(stream_id), reader(max_message) {}

  GrpcMethod::Kind kind() const { return handler->kind; }
  size_t unsent() const { return out.size() - out_pos; }

  const int32_t id;
  // The request's headers.
  std::string method, content_type, encoding_name, timeout;
  size_t header_bytes = 0;
  bool headers_too_large = false;
  bool over_capacity = false;  // arrived with options.max_streams open
  bool counted = false;        // holds one of options.max_streams
  std::shared_ptr<GrpcCallInfo> info = std::make_shared<GrpcCallInfo>();
  // Set once the headers pass every check.
  const GrpcMethod* handler = nullptr;
  GrpcEncoding encoding = GrpcEncoding::kIdentity;
  // Requests: whole messages wait in `queued` for the handler; bytes past
  // room in the queue stay unconsumed (their window closed) until it drains.
  GrpcMessageReader reader;
  std::deque<std::string> queued;
  size_t queued_bytes = 0, unconsumed = 0;
  int messages = 0;
  std::string watch_request;
  bool remote_closed = false, running = false;
  // Answers: `out` goes to nghttp2 as the client's window allows, then the
  // trailers once `trailers` is set.
  std::string out;
  size_t out_pos = 0;
  std::optional<GrpcReply> trailers;
  std::string last_body;  // kWatch: what was last sent
  bool headers_sent = false, finished = false, end_sent = false;
  bool abandoned = false;  // reset by the server: its client stopped reading
  GrpcClock::time_point call_deadline = GrpcClock::time_point::max();
  GrpcClock::time_point idle_deadline = GrpcClock::time_point::max();
  GrpcClock::time_point send_deadline = GrpcClock::time_point::max();
  GrpcClock::time_point next_poll = GrpcClock::time_point::max();
};

}  // namespace bertrt::server

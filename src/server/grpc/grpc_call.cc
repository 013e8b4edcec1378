// GrpcSession's call half: a call's checks when its headers arrive, its
// messages in, its handler runs, its answers and status out, and its
// timeouts. The connection half (nghttp2's callbacks, bytes, time) is
// grpc_session.cc's.
#include <nghttp2/nghttp2.h>

#include <algorithm>

#include "server/grpc/grpc_session.h"
#include "server/grpc/grpc_stream.h"

namespace bertrt::server {
namespace {

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

std::string Seconds(std::chrono::milliseconds d) {
  std::string text = std::to_string(d.count() / 1000.0);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

// application/grpc, optionally +proto and parameters.
bool IsGrpcContentType(std::string_view type) {
  constexpr std::string_view kGrpc = "application/grpc";
  if (type.substr(0, kGrpc.size()) != kGrpc) return false;
  type.remove_prefix(kGrpc.size());
  return type.empty() || type[0] == ';' || type.substr(0, 6) == "+proto";
}

constexpr auto kNever = GrpcClock::time_point::max();

}  // namespace

void GrpcSession::OnRequestHeaders(Stream& s) {
  const auto now = GrpcClock::now();
  if (s.over_capacity)
    return Finish(s, GrpcReply::Error(GrpcCode::kResourceExhausted,
                                      "the server has " + std::to_string(options_.max_streams) +
                                          " calls open (bertrt serve --grpc-max-streams); "
                                          "try again later"));
  if (s.headers_too_large)
    return Finish(s, GrpcReply::Error(GrpcCode::kResourceExhausted,
                                      "the call's headers are larger than " +
                                          std::to_string(kMaxHeaderListBytes) + " bytes"));
  if (s.method != "POST")
    return Finish(s, GrpcReply::Error(GrpcCode::kUnimplemented,
                                      "gRPC calls are POST requests, not " + s.method));
  if (!IsGrpcContentType(s.content_type))
    return Finish(s,
                  GrpcReply::Error(GrpcCode::kUnknown, "content-type \"" + s.content_type +
                                                           "\" is not application/grpc"),
                  415);
  const auto encoding = ParseGrpcEncoding(s.encoding_name);
  if (!encoding)
    return Finish(s, GrpcReply::Error(GrpcCode::kUnimplemented,
                                      "grpc-encoding \"" + s.encoding_name +
                                          "\" is not supported; use identity, deflate or gzip"));
  s.encoding = *encoding;
  if (!s.timeout.empty()) {
    const auto timeout = ParseGrpcTimeout(s.timeout);
    if (!timeout)
      return Finish(s, GrpcReply::Error(GrpcCode::kInternal,
                                        "grpc-timeout \"" + s.timeout + "\" is malformed"));
    s.call_deadline = now + *timeout;
  }
  const GrpcMethod* method = methods_(s.info->path);
  if (!method)
    return Finish(s, GrpcReply::Error(GrpcCode::kUnimplemented,
                                      "unknown method " + s.info->path +
                                          " (this server offers inference.GRPCInferenceService "
                                          "and grpc.health.v1.Health)"));
  if (method->admit)
    if (auto refused = method->admit(*s.info)) return Finish(s, *refused);
  s.handler = method;
  s.idle_deadline = now + options_.stream_idle_timeout;
}

void GrpcSession::OnData(Stream& s, const uint8_t* data, size_t size) {
  std::vector<GrpcMessage> messages;
  std::optional<GrpcReply> error =
      s.reader.Feed({reinterpret_cast<const char*>(data), size}, messages);
  for (GrpcMessage& m : messages) {
    if (error) break;
    if (++s.messages > 1 && s.kind() != GrpcMethod::Kind::kBidiStream) {
      error = GrpcReply::Error(GrpcCode::kInternal,
                               "more than one request message on a call that takes one");
      break;
    }
    error = DecompressGrpcMessage(m, s.encoding, options_.max_message_bytes);
    if (error) break;
    s.queued_bytes += m.bytes.size();
    s.queued.push_back(std::move(m.bytes));
    s.idle_deadline = GrpcClock::now() + options_.stream_idle_timeout;
  }
  if (error) {
    nghttp2_session_consume(session_, s.id, size);
    return Finish(s, *error);
  }
  // A stream with a full queue gets no more window until its handler takes
  // a message.
  if (s.queued_bytes >= options_.max_message_bytes)
    s.unconsumed += size;
  else
    nghttp2_session_consume(session_, s.id, size);
  if (s.kind() == GrpcMethod::Kind::kBidiStream) Pump(s);
}

void GrpcSession::OnRemoteClose(Stream& s) {
  s.remote_closed = true;
  if (!s.handler || s.finished) return;
  if (s.reader.mid_message())
    return Finish(
        s, GrpcReply::Error(GrpcCode::kInternal, "the request stream ended inside a message"));
  if (s.kind() != GrpcMethod::Kind::kBidiStream && s.messages != 1)
    return Finish(
        s, GrpcReply::Error(GrpcCode::kInternal, "the call ended without its request message"));
  Pump(s);
}

void GrpcSession::Consume(Stream& s, size_t bytes) {
  if (bytes == 0) return;
  nghttp2_session_consume(session_, s.id, bytes);
  s.unconsumed -= bytes;
}

void GrpcSession::Pump(Stream& s) {
  if (s.finished || s.running || !s.handler) return;
  const bool stream = s.kind() == GrpcMethod::Kind::kBidiStream;
  // Unary calls and watches run once the request is whole; a stream's next
  // message once its last answer has left (so a client that does not read
  // stops its own stream).
  if (!stream && !s.remote_closed) return;
  if (s.unsent() > 0) return;
  if (!s.queued.empty()) {
    // A client that leaves answers unread waits for them to go before its
    // next call runs.
    if (unsent_bytes_ >= kMaxUnsentBytes) {
      held_.push_back(s.id);
      return;
    }
    std::string request = std::move(s.queued.front());
    s.queued.pop_front();
    s.queued_bytes -= request.size();
    if (s.queued_bytes < options_.max_message_bytes) Consume(s, s.unconsumed);
    if (s.kind() == GrpcMethod::Kind::kWatch) s.watch_request = request;
    s.running = true;
    dispatch_({s.id, s.handler, s.info, std::move(request)});
    return;
  }
  if (stream && s.remote_closed) return Finish(s, GrpcReply::Ok(""));
  if (stream && shutting_down_) return Finish(s, ShuttingDown());
}

void GrpcSession::Complete(int32_t stream_id, GrpcReply reply) {
  Stream* found = Find(stream_id);
  if (!found || found->finished) return;
  Stream& s = *found;
  s.running = false;
  if (!reply.ok()) return Finish(s, reply);
  const auto now = GrpcClock::now();
  switch (s.kind()) {
    case GrpcMethod::Kind::kUnary:
      SendMessage(s, reply.body);
      return Finish(s, GrpcReply::Ok(""));
    case GrpcMethod::Kind::kBidiStream:
      SendMessage(s, reply.body);
      s.idle_deadline = now + options_.stream_idle_timeout;
      return Pump(s);
    case GrpcMethod::Kind::kWatch:
      if (!s.headers_sent || reply.body != s.last_body) {
        SendMessage(s, reply.body);
        s.last_body = std::move(reply.body);
      }
      if (shutting_down_) return Finish(s, ShuttingDown());
      s.next_poll = now + kWatchInterval;
      return;
  }
}

void GrpcSession::SendMessage(Stream& s, std::string_view body) {
  if (s.unsent() == 0) s.send_deadline = GrpcClock::now() + options_.stream_idle_timeout;
  const std::string framed = FramedGrpcMessage(body);
  s.out += framed;
  unsent_bytes_ += framed.size();
  if (s.headers_sent) {
    nghttp2_session_resume_data(session_, s.id);
    return;
  }
  s.headers_sent = true;
  nghttp2_nv headers[] = {Header(":status", "200"), Header("content-type", "application/grpc"),
                          Header("grpc-accept-encoding", kGrpcAcceptEncoding)};
  nghttp2_data_provider answer{};
  answer.read_callback = [](nghttp2_session*, int32_t stream_id, uint8_t* buf, size_t length,
                            uint32_t* flags, nghttp2_data_source*, void* user_data) -> ssize_t {
    auto& self = *static_cast<GrpcSession*>(user_data);
    Stream* found = self.Find(stream_id);
    return found ? self.ReadAnswer(*found, buf, length, flags)
                 : ssize_t{NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE};
  };
  nghttp2_submit_response(session_, s.id, headers, std::size(headers), &answer);
}

ssize_t GrpcSession::ReadAnswer(Stream& s, uint8_t* buf, size_t length, uint32_t* flags) {
  const size_t n = std::min(length, s.unsent());
  std::copy_n(s.out.data() + s.out_pos, n, buf);
  s.out_pos += n;
  unsent_bytes_ -= n;
  if (s.unsent() > 0) {
    s.send_deadline = GrpcClock::now() + options_.stream_idle_timeout;
    return static_cast<ssize_t>(n);
  }
  s.out.clear();
  s.out_pos = 0;
  s.send_deadline = kNever;
  if (s.trailers) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    const std::string status = std::to_string(static_cast<int>(s.trailers->code));
    const std::string message = PercentEncodedGrpcMessage(s.trailers->message);
    nghttp2_nv trailers[] = {Header("grpc-status", status), Header("grpc-message", message)};
    nghttp2_submit_trailer(session_, s.id, trailers, message.empty() ? 1 : 2);
    return static_cast<ssize_t>(n);
  }
  // The answer has left: the stream's next message may run (after Send).
  drained_.push_back(s.id);
  return n > 0 ? static_cast<ssize_t>(n) : ssize_t{NGHTTP2_ERR_DEFERRED};
}

void GrpcSession::Finish(Stream& s, const GrpcReply& reply, int http_status) {
  if (s.finished) return;
  s.finished = true;
  // A handler still running computes for nobody.
  if (s.running) s.info->cancelled->store(true);
  s.queued.clear();
  s.queued_bytes = 0;
  Consume(s, s.unconsumed);
  if (s.headers_sent) {
    s.trailers = reply;
    nghttp2_session_resume_data(session_, s.id);
    return;
  }
  // Trailers-only: the status in the one HEADERS frame.
  s.headers_sent = true;
  const std::string status_line = std::to_string(http_status);
  const std::string status = std::to_string(static_cast<int>(reply.code));
  const std::string message = PercentEncodedGrpcMessage(reply.message);
  nghttp2_nv headers[] = {Header(":status", status_line),
                          Header("content-type", "application/grpc"),
                          Header("grpc-accept-encoding", kGrpcAcceptEncoding),
                          Header("grpc-status", status), Header("grpc-message", message)};
  nghttp2_submit_response(session_, s.id, headers, std::size(headers) - (message.empty() ? 1 : 0),
                          nullptr);
}

bool GrpcSession::WaitsForMessage(const Stream& s) const {
  return s.handler && !s.finished && !s.remote_closed && !s.running && s.queued.empty() &&
         s.kind() != GrpcMethod::Kind::kWatch;
}

std::optional<GrpcClock::time_point> GrpcSession::NextWake(const Stream& s) const {
  GrpcClock::time_point wake = s.unsent() > 0 ? s.send_deadline : kNever;
  if (!s.finished) {
    wake = std::min(wake, s.call_deadline);
    if (WaitsForMessage(s)) wake = std::min(wake, s.idle_deadline);
    if (!s.running) wake = std::min(wake, s.next_poll);
  }
  if (wake == kNever) return std::nullopt;
  return wake;
}

void GrpcSession::Expire(Stream& s, GrpcClock::time_point now) {
  if (s.unsent() > 0 && now >= s.send_deadline) {
    // The client has not taken its answer for a whole idle timeout: the
    // answer is dropped and the stream reset (a status could not reach it).
    s.abandoned = s.finished = true;
    s.info->cancelled->store(true);
    unsent_bytes_ -= s.unsent();
    s.out.clear();
    s.out_pos = 0;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
    return;
  }
  if (s.finished) return;
  if (now >= s.call_deadline) {
    Finish(s, GrpcReply::Error(GrpcCode::kDeadlineExceeded,
                               "the call's deadline (grpc-timeout " + s.timeout + ") passed"));
  } else if (WaitsForMessage(s) && now >= s.idle_deadline) {
    Finish(s, GrpcReply::Error(GrpcCode::kDeadlineExceeded,
                               "no request message for " + Seconds(options_.stream_idle_timeout) +
                                   " s on this call; bertrt serve --grpc-stream-idle-timeout "
                                   "sets how long an open call may wait for its client"));
  } else if (!s.running && now >= s.next_poll) {
    s.running = true;
    s.next_poll = kNever;
    dispatch_({s.id, s.handler, s.info, s.watch_request});
  }
}

}  // namespace bertrt::server

// GrpcSession's connection half: nghttp2's set-up and callbacks, bytes in and
// out, time, cancel accounting and shutdown. A call's life is grpc_call.cc's.
#include "server/grpc/grpc_session.h"

#include <nghttp2/nghttp2.h>

#include "server/grpc/grpc_stream.h"

namespace bertrt::server {
namespace {

// A stream's flow-control window (SETTINGS_INITIAL_WINDOW_SIZE) and the
// connection's: what a client may send ahead of what the server took.
constexpr int32_t kStreamWindow = 1 << 20;
constexpr int32_t kConnectionWindow = 8 << 20;
// Frames nghttp2 may hold for a client that does not read before the session
// stops reading it (Backlogged), and SETTINGS/PING acknowledgements it may
// hold before it gives up on the connection.
constexpr size_t kMaxQueuedFrames = 256;
constexpr size_t kMaxOutboundAck = 1000;
// nghttp2's own reset limit (Debian's backport of the rapid-reset fix: a
// token bucket over every RST_STREAM received, which ends the connection with
// GOAWAY INTERNAL_ERROR) is kept as a backstop this many times looser than
// ResetAccount, which counts cancels the way this server pays for them.
constexpr uint64_t kNghttp2ResetSlack = 10;

}  // namespace

struct GrpcSession::Callbacks {
  static GrpcSession& Self(void* user_data) { return *static_cast<GrpcSession*>(user_data); }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    GrpcSession& self = Self(user_data);
    // A call that arrives after GOAWAY ENHANCE_YOUR_CALM is left unread.
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST ||
        self.closing_)
      return 0;
    auto s = std::make_unique<Stream>(frame->hd.stream_id, self.options_.max_message_bytes);
    s->info->peer = self.peer_;
    if (self.open_streams_.fetch_add(1) < self.options_.max_streams) {
      s->counted = true;
    } else {
      self.open_streams_.fetch_sub(1);
      s->over_capacity = true;
    }
    self.streams_[s->id] = std::move(s);
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                      void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    Stream* s = Self(user_data).Find(frame->hd.stream_id);
    if (!s || s->headers_too_large) return 0;
    s->header_bytes += namelen + valuelen + 32;
    if (s->header_bytes > kMaxHeaderListBytes) {
      s->headers_too_large = true;
      return 0;
    }
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":method")
      s->method = std::move(v);
    else if (n == ":path")
      s->info->path = std::move(v);
    else if (n == "content-type")
      s->content_type = std::move(v);
    else if (n == "grpc-timeout")
      s->timeout = std::move(v);
    else if (n == "grpc-encoding")
      s->encoding_name = std::move(v);
    else if (n == "authorization")
      s->info->authorization = std::move(v);
    else if (n == "x-request-id")
      s->info->request_id = std::move(v);
    else if (n == "traceparent")
      s->info->traceparent = std::move(v);
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    GrpcSession& self = Self(user_data);
    if (frame->hd.type == NGHTTP2_SETTINGS) self.got_settings_ = true;
    Stream* s = self.Find(frame->hd.stream_id);
    if (!s) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
      self.OnRequestHeaders(*s);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
      self.OnRemoteClose(*s);
    return 0;
  }

  static int OnDataChunk(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t len, void* user_data) {
    GrpcSession& self = Self(user_data);
    Stream* s = self.Find(stream_id);
    if (!s || !s->handler || s->finished) {
      nghttp2_session_consume(session, stream_id, len);
      return 0;
    }
    self.OnData(*s, data, len);
    return 0;
  }

  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    GrpcSession& self = Self(user_data);
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
      return 0;
    Stream* s = self.Find(frame->hd.stream_id);
    if (!s) return 0;
    s->end_sent = true;
    self.resets_.OnCompleted(GrpcClock::now());
    // The answer is complete while the client may still be sending: tell it
    // to stop (RST_STREAM NO_ERROR, as gRPC servers do).
    if (!s->remote_closed)
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    return 0;
  }

  // Every way a stream ends: its answer sent, the client's RST_STREAM, or
  // nghttp2's own reset of a stream the client broke the protocol on.
  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t, void* user_data) {
    GrpcSession& self = Self(user_data);
    auto it = self.streams_.find(stream_id);
    if (it == self.streams_.end()) return 0;
    Stream& s = *it->second;
    if (s.counted) self.open_streams_.fetch_sub(1);
    if (s.unconsumed > 0) nghttp2_session_consume_connection(session, s.unconsumed);
    self.unsent_bytes_ -= s.unsent();
    const bool cancelled = !s.end_sent && !s.abandoned;
    if (!s.end_sent) s.info->cancelled->store(true);
    self.streams_.erase(it);
    if (cancelled) self.OnCancelled();
    return 0;
  }
};

GrpcSession::GrpcSession(const GrpcOptions& options, GrpcMethodLookup methods, Dispatch dispatch,
                         std::atomic<int>& open_streams, std::string peer)
    : options_(options),
      methods_(std::move(methods)),
      dispatch_(std::move(dispatch)),
      open_streams_(open_streams),
      peer_(std::move(peer)),
      resets_(options.max_resets_per_second),
      preface_deadline_(GrpcClock::now() + kPrefaceTimeout) {}

GrpcSession::~GrpcSession() {
  for (auto& [id, s] : streams_) {
    if (!s->end_sent) s->info->cancelled->store(true);
    if (s->counted) open_streams_.fetch_sub(1);
  }
  if (session_) nghttp2_session_del(session_);
}

Status GrpcSession::Start() {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_option* option = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0 || nghttp2_option_new(&option) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return Internal("nghttp2: out of memory creating a session");
  }
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Callbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, Callbacks::OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, Callbacks::OnFrameSend);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, Callbacks::OnStreamClose);
  // Windows reopen as the session takes the bytes (grpc_call.cc's OnData),
  // so that a stream whose queue is full stops its client.
  nghttp2_option_set_no_auto_window_update(option, 1);
  // Closed streams are forgotten at once (they would be kept for RFC 7540
  // priorities, which are turned off below).
  nghttp2_option_set_no_closed_streams(option, 1);
  nghttp2_option_set_max_outbound_ack(option, kMaxOutboundAck);
  const uint64_t backstop = uint64_t{options_.max_resets_per_second} * kNghttp2ResetSlack;
  nghttp2_option_set_stream_reset_rate_limit(option, backstop, backstop);
  const int rv = nghttp2_session_server_new2(&session_, callbacks, this, option);
  nghttp2_session_callbacks_del(callbacks);
  nghttp2_option_del(option);
  if (rv != 0) return Internal(std::string("nghttp2: ") + nghttp2_strerror(rv));
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderListBytes},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (int e = nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
      e != 0)
    return Internal(std::string("nghttp2: ") + nghttp2_strerror(e));
  if (int e =
          nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
      e != 0)
    return Internal(std::string("nghttp2: ") + nghttp2_strerror(e));
  return Status::Ok();
}

GrpcSession::Stream* GrpcSession::Find(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : it->second.get();
}

Status GrpcSession::Receive(const uint8_t* data, size_t size) {
  const ssize_t rv = nghttp2_session_mem_recv(session_, data, size);
  if (rv < 0) return InvalidArgument(std::string("HTTP/2: ") + nghttp2_strerror(rv));
  return Status::Ok();
}

Status GrpcSession::Send(std::string& out, size_t max_bytes) {
  for (;;) {
    while (out.size() < max_bytes) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) return Internal(std::string("HTTP/2: ") + nghttp2_strerror(n));
      if (n == 0) break;
      out.append(reinterpret_cast<const char*>(data), n);
    }
    if (unsent_bytes_ < kMaxUnsentBytes) {
      drained_.insert(drained_.end(), held_.begin(), held_.end());
      held_.clear();
    }
    if (drained_.empty()) return Status::Ok();
    // Streams whose answer left (or that unsent answers held back) may now
    // run their next message, or end.
    std::vector<int32_t> drained;
    drained.swap(drained_);
    for (int32_t id : drained)
      if (Stream* s = Find(id)) Pump(*s);
    if (out.size() >= max_bytes) return Status::Ok();
  }
}

void GrpcSession::OnCancelled() {
  if (closing_ || resets_.OnReset(GrpcClock::now())) return;
  Calm("too many calls cancelled before their answer (over " +
       std::to_string(options_.max_resets_per_second) +
       " a second, or that many more than completed; bertrt serve "
       "--grpc-max-resets-per-second)");
}

void GrpcSession::Calm(const std::string& why) {
  closing_ = true;
  nghttp2_submit_goaway(
      session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
      NGHTTP2_ENHANCE_YOUR_CALM, reinterpret_cast<const uint8_t*>(why.data()), why.size());
}

std::optional<GrpcClock::time_point> GrpcSession::NextWake() const {
  std::optional<GrpcClock::time_point> wake;
  if (!got_settings_) wake = preface_deadline_;
  for (const auto& [id, s] : streams_)
    if (auto t = NextWake(*s); t && (!wake || *t < *wake)) wake = t;
  return wake;
}

void GrpcSession::Expire(GrpcClock::time_point now) {
  if (!got_settings_ && now >= preface_deadline_) {
    closing_ = true;  // no HTTP/2 client: close without a word
    return;
  }
  for (auto& [id, s] : streams_) Expire(*s, now);
}

void GrpcSession::Shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  // Streams and watches waiting on their client would hold the shutdown for
  // its whole grace; a unary call waiting is only waiting for its message.
  for (auto& [id, s] : streams_) {
    if (!s->handler || s->finished || s->running) continue;
    const bool watch = s->kind() == GrpcMethod::Kind::kWatch;
    if (watch || (s->kind() == GrpcMethod::Kind::kBidiStream && WaitsForMessage(*s)))
      Finish(*s, ShuttingDown());
  }
}

bool GrpcSession::WantsRead() const { return !closing_ && nghttp2_session_want_read(session_); }

bool GrpcSession::Backlogged() const {
  return nghttp2_session_get_outbound_queue_size(session_) > kMaxQueuedFrames;
}

bool GrpcSession::Done() const {
  if (nghttp2_session_want_write(session_)) return false;
  return closing_ || !nghttp2_session_want_read(session_);
}

}  // namespace bertrt::server

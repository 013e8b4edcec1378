// GrpcSession against nghttp2's own client session, in memory: the calls'
// lifecycle (unary, streams one message at a time, trailers-only errors) and
// the defences (rapid reset, idle and deadline timeouts, the server-wide cap),
// with handlers run by the test so that what runs when is explicit.
#include "server/grpc/grpc_session.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <map>

#include "server/grpc/grpc_wire.h"

namespace bertrt::server {
namespace {

using namespace std::chrono_literals;
using Kind = GrpcMethod::Kind;

struct Answer {
  std::map<std::string, std::string> headers, trailers;
  std::string data;
  bool closed = false;
  uint32_t reset = 0;
  std::optional<int> status() const {
    auto find = [](const auto& m) { return m.find("grpc-status"); };
    if (auto it = find(trailers); it != trailers.end()) return std::stoi(it->second);
    if (auto it = find(headers); it != headers.end()) return std::stoi(it->second);
    return std::nullopt;
  }
  std::string message() const {
    auto it = trailers.find("grpc-message");
    if (it != trailers.end()) return it->second;
    it = headers.find("grpc-message");
    return it == headers.end() ? "" : it->second;
  }
};

// An HTTP/2 client (nghttp2's) whose bytes go straight to a GrpcSession.
class Client {
 public:
  // `window`: the client's SETTINGS_INITIAL_WINDOW_SIZE (0: it takes no answer).
  explicit Client(uint32_t window = 65535) {
    nghttp2_session_callbacks* cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, OnData);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, OnClose);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, OnFrame);
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry settings{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, &settings, 1);
  }
  // Starts taking answers: a large window for every stream and the connection.
  void OpenWindow() {
    const nghttp2_settings_entry settings{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 30};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, &settings, 1);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 30);
  }
  ~Client() { nghttp2_session_del(session_); }

  // Opens a call; its body is what Send queues, until End.
  int32_t Open(const std::string& path,
               std::vector<std::pair<std::string, std::string>> extra = {}) {
    std::vector<std::pair<std::string, std::string>> fields = {{":method", "POST"},
                                                               {":scheme", "http"},
                                                               {":authority", "test"},
                                                               {":path", path},
                                                               {"content-type", "application/grpc"},
                                                               {"te", "trailers"}};
    fields.insert(fields.end(), extra.begin(), extra.end());
    std::vector<nghttp2_nv> nv;
    for (auto& [n, v] : fields)
      nv.push_back({reinterpret_cast<uint8_t*>(n.data()), reinterpret_cast<uint8_t*>(v.data()),
                    n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    nghttp2_data_provider body{};
    body.read_callback = ReadBody;
    const int32_t id = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &body, this);
    bodies_[id];
    return id;
  }
  void Send(int32_t id, std::string_view message) {
    bodies_[id].bytes += FramedGrpcMessage(message);
    nghttp2_session_resume_data(session_, id);
  }
  void SendRaw(int32_t id, std::string bytes) {
    bodies_[id].bytes += bytes;
    nghttp2_session_resume_data(session_, id);
  }
  void End(int32_t id) {
    bodies_[id].end = true;
    nghttp2_session_resume_data(session_, id);
  }
  void Reset(int32_t id) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }

  // Moves bytes both ways until neither side has any.
  void Exchange(GrpcSession& server) {
    for (bool moved = true; moved;) {
      moved = false;
      const uint8_t* data;
      for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;) {
        ASSERT_TRUE(server.Receive(data, n).ok());
        moved = true;
      }
      std::string out;
      ASSERT_TRUE(server.Send(out, 1 << 20).ok());
      if (!out.empty()) {
        nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(out.data()),
                                 out.size());
        moved = true;
      }
    }
  }

  std::map<int32_t, Answer> answers;
  std::optional<uint32_t> goaway;

 private:
  struct Body {
    std::string bytes;
    size_t pos = 0;
    bool end = false;
  };

  static Client& Self(void* p) { return *static_cast<Client*>(p); }
  static ssize_t ReadBody(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source*, void* user) {
    Body& b = Self(user).bodies_[id];
    const size_t n = std::min(length, b.bytes.size() - b.pos);
    std::copy_n(b.bytes.data() + b.pos, n, buf);
    b.pos += n;
    if (b.pos == b.bytes.size() && b.end)
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (n == 0)
      return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(n);
  }
  static int OnHeader(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t nl,
                      const uint8_t* value, size_t vl, uint8_t, void* user) {
    Answer& a = Self(user).answers[f->hd.stream_id];
    auto& into = f->headers.cat == NGHTTP2_HCAT_HEADERS ? a.trailers : a.headers;
    into[std::string(reinterpret_cast<const char*>(name), nl)] =
        std::string(reinterpret_cast<const char*>(value), vl);
    return 0;
  }
  static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                    void* user) {
    Self(user).answers[id].data.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }
  static int OnClose(nghttp2_session*, int32_t id, uint32_t code, void* user) {
    Answer& a = Self(user).answers[id];
    a.closed = true;
    a.reset = code;
    return 0;
  }
  static int OnFrame(nghttp2_session*, const nghttp2_frame* f, void* user) {
    if (f->hd.type == NGHTTP2_GOAWAY) Self(user).goaway = f->goaway.error_code;
    return 0;
  }

  nghttp2_session* session_ = nullptr;
  std::map<int32_t, Body> bodies_;
};

// A server session whose handlers the test runs: `work` is what was dispatched.
struct Server {
  explicit Server(GrpcOptions o = {}) : options(std::move(o)) {
    auto echo = [](const GrpcCallInfo&, const std::string& request) {
      return GrpcReply::Ok(request + "!");
    };
    methods["/t.S/Unary"] = {Kind::kUnary, false, {}, echo};
    methods["/t.S/Stream"] = {Kind::kBidiStream, false, {}, echo};
    methods["/t.S/Watch"] = {Kind::kWatch, true, {}, echo};
    methods["/t.S/Big"] = {Kind::kUnary, false, {}, [](const GrpcCallInfo&, const std::string&) {
                             return GrpcReply::Ok(std::string(1 << 20, 'x'));
                           }};
    methods["/t.S/Keyed"] = {Kind::kUnary, false,
                             [](const GrpcCallInfo& call) -> std::optional<GrpcReply> {
                               if (call.authorization == "Bearer k") return std::nullopt;
                               return GrpcReply::Error(GrpcCode::kUnauthenticated, "no key");
                             },
                             echo};
    session = std::make_unique<GrpcSession>(
        options,
        [this](std::string_view path) -> const GrpcMethod* {
          auto it = methods.find(std::string(path));
          return it == methods.end() ? nullptr : &it->second;
        },
        [this](GrpcWork w) { work.push_back(std::move(w)); }, open_streams, "ipv4:test");
    EXPECT_TRUE(session->Start().ok());
  }
  // Runs the oldest dispatched handler and hands its reply back.
  void RunOne() {
    ASSERT_FALSE(work.empty());
    GrpcWork w = std::move(work.front());
    work.erase(work.begin());
    session->Complete(w.stream_id, w.method->handle(*w.info, w.request));
  }

  GrpcOptions options;
  std::map<std::string, GrpcMethod> methods;
  std::atomic<int> open_streams{0};
  std::vector<GrpcWork> work;
  std::unique_ptr<GrpcSession> session;
};

std::vector<std::string> Messages(const std::string& data) {
  std::vector<std::string> out;
  GrpcMessageReader reader(1 << 20);
  std::vector<GrpcMessage> got;
  EXPECT_FALSE(reader.Feed(data, got));
  for (auto& m : got) out.push_back(m.bytes);
  return out;
}

TEST(GrpcSession, AnswersAUnaryCallOnceItsMessageIsWhole) {
  Server s;
  Client c;
  const int32_t id = c.Open("/t.S/Unary", {{"x-request-id", "r-1"}});
  c.Exchange(*s.session);
  EXPECT_TRUE(s.work.empty());  // headers alone: nothing to run, no thread held
  c.Send(id, "abc");
  c.End(id);
  c.Exchange(*s.session);
  ASSERT_EQ(s.work.size(), 1u);
  EXPECT_EQ(s.work[0].info->request_id, "r-1");
  EXPECT_EQ(s.work[0].info->peer, "ipv4:test");
  s.RunOne();
  c.Exchange(*s.session);
  const Answer& a = c.answers[id];
  EXPECT_EQ(a.headers.at(":status"), "200");
  EXPECT_EQ(a.headers.at("content-type"), "application/grpc");
  EXPECT_EQ(Messages(a.data), std::vector<std::string>{"abc!"});
  EXPECT_EQ(a.status(), 0);
  EXPECT_TRUE(a.closed);
  EXPECT_EQ(s.open_streams, 0);
}

TEST(GrpcSession, RefusalsAreTrailersOnlyAndRunNothing) {
  Server s;
  Client c;
  const int32_t unknown = c.Open("/t.S/Nope");
  const int32_t keyless = c.Open("/t.S/Keyed");
  c.Send(unknown, "x");
  c.End(unknown);
  c.Send(keyless, "x");
  c.End(keyless);
  c.Exchange(*s.session);
  EXPECT_TRUE(s.work.empty());
  EXPECT_EQ(c.answers[unknown].status(), static_cast<int>(GrpcCode::kUnimplemented));
  EXPECT_EQ(c.answers[keyless].status(), static_cast<int>(GrpcCode::kUnauthenticated));
  EXPECT_TRUE(c.answers[keyless].data.empty());
  EXPECT_TRUE(c.answers[keyless].trailers.empty());  // the status came in the headers
}

TEST(GrpcSession, AnswersAStreamOneMessageAtATimeInOrder) {
  Server s;
  Client c;
  const int32_t id = c.Open("/t.S/Stream");
  for (const char* m : {"a", "b", "c"}) c.Send(id, m);
  c.End(id);
  c.Exchange(*s.session);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(s.work.size(), 1u) << "one message runs at a time";
    s.RunOne();
    c.Exchange(*s.session);
  }
  EXPECT_EQ(Messages(c.answers[id].data), (std::vector<std::string>{"a!", "b!", "c!"}));
  EXPECT_EQ(c.answers[id].status(), 0);
}

TEST(GrpcSession, RapidResetGetsGoawayEnhanceYourCalm) {
  GrpcOptions o;
  o.max_resets_per_second = 20;
  Server s(o);
  Client c;
  for (int i = 0; i < 100 && !c.goaway; ++i) {
    const int32_t id = c.Open("/t.S/Unary");
    c.Exchange(*s.session);  // the HEADERS go out
    c.Reset(id);
    c.Exchange(*s.session);
  }
  ASSERT_TRUE(c.goaway);
  EXPECT_EQ(*c.goaway, static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  EXPECT_TRUE(s.session->Done());
  EXPECT_TRUE(s.work.empty());
}

// "MadeYouReset" (CVE-2025-8671): frames that make the server reset the
// stream itself, after the call's handler was started, cost the client as
// much as its own RST_STREAM.
TEST(GrpcSession, ResetsTheClientProvokesCountToo) {
  GrpcOptions o;
  o.max_resets_per_second = 20;
  Server s(o);
  Client c;
  for (int i = 0; i < 100 && !c.goaway; ++i) {
    const int32_t id = c.Open("/t.S/Unary");
    c.Send(id, "x");
    c.End(id);
    c.Exchange(*s.session);
    // A WINDOW_UPDATE that overflows the stream's window: a stream error
    // (FLOW_CONTROL_ERROR), reset by nghttp2.
    const uint8_t overflow[] = {
        0,           0,    4,    8,    0,   uint8_t(id >> 24), uint8_t(id >> 16), uint8_t(id >> 8),
        uint8_t(id), 0x7f, 0xff, 0xff, 0xff};
    ASSERT_TRUE(s.session->Receive(overflow, sizeof(overflow)).ok());
    c.Exchange(*s.session);
  }
  ASSERT_TRUE(c.goaway);
  EXPECT_EQ(*c.goaway, static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  for (const GrpcWork& w : s.work) EXPECT_TRUE(w.info->is_cancelled());
}

TEST(GrpcSession, AnswersAClientDoesNotTakeHoldBackItsNextCalls) {
  GrpcOptions o;
  o.stream_idle_timeout = 5s;
  Server s(o);
  Client c(/*window=*/0);
  auto call = [&] {
    const int32_t id = c.Open("/t.S/Big");
    c.Send(id, "x");
    c.End(id);
    c.Exchange(*s.session);
    return id;
  };
  const size_t fit = kMaxUnsentBytes / (1 << 20);
  for (size_t i = 0; i < fit; ++i) {
    call();
    s.RunOne();
    c.Exchange(*s.session);
  }
  const int32_t held = call();
  EXPECT_TRUE(s.work.empty()) << "run while " << fit << " MiB of answers wait";
  c.OpenWindow();
  c.Exchange(*s.session);
  ASSERT_EQ(s.work.size(), 1u);
  s.RunOne();
  c.Exchange(*s.session);
  EXPECT_EQ(c.answers[held].status(), 0);
  EXPECT_EQ(c.answers[held].data.size(), (1u << 20) + 5);
}

TEST(GrpcSession, AnAnswerLeftUntakenIsDroppedAfterTheIdleTimeout) {
  GrpcOptions o;
  o.stream_idle_timeout = 5s;
  Server s(o);
  Client c(/*window=*/0);
  const int32_t id = c.Open("/t.S/Big");
  c.Send(id, "x");
  c.End(id);
  c.Exchange(*s.session);
  s.RunOne();
  c.Exchange(*s.session);
  EXPECT_FALSE(c.answers[id].closed);
  s.session->Expire(GrpcClock::now() + 6s);
  c.Exchange(*s.session);
  EXPECT_TRUE(c.answers[id].closed);
  EXPECT_EQ(c.answers[id].reset, static_cast<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_FALSE(c.goaway);  // the server's own reset is no mark against the client
}

TEST(GrpcSession, ResetsWithinTheLimitAreAClientsRight) {
  GrpcOptions o;
  o.max_resets_per_second = 20;
  Server s(o);
  Client c;
  for (int i = 0; i < 10; ++i) {
    const int32_t done = c.Open("/t.S/Unary");
    c.Send(done, "x");
    c.End(done);
    const int32_t reset = c.Open("/t.S/Unary");
    c.Exchange(*s.session);
    c.Reset(reset);
    c.Exchange(*s.session);
    s.RunOne();
    c.Exchange(*s.session);
  }
  EXPECT_FALSE(c.goaway);
  EXPECT_FALSE(s.session->Done());
}

TEST(GrpcSession, AResetCancelsTheRunningHandler) {
  Server s;
  Client c;
  const int32_t id = c.Open("/t.S/Unary");
  c.Send(id, "x");
  c.End(id);
  c.Exchange(*s.session);
  ASSERT_EQ(s.work.size(), 1u);
  EXPECT_FALSE(s.work[0].info->is_cancelled());
  c.Reset(id);
  c.Exchange(*s.session);
  EXPECT_TRUE(s.work[0].info->is_cancelled());
  s.RunOne();  // its reply finds no call
  c.Exchange(*s.session);
  EXPECT_EQ(s.open_streams, 0);
}

TEST(GrpcSession, AnIdleCallEndsAfterTheIdleTimeout) {
  GrpcOptions o;
  o.stream_idle_timeout = 2s;
  Server s(o);
  Client c;
  const int32_t id = c.Open("/t.S/Stream");
  c.Exchange(*s.session);
  const auto wake = s.session->NextWake();
  ASSERT_TRUE(wake);
  s.session->Expire(*wake - 1s);
  c.Exchange(*s.session);
  EXPECT_FALSE(c.answers[id].status());
  s.session->Expire(*wake);
  c.Exchange(*s.session);
  EXPECT_EQ(c.answers[id].status(), static_cast<int>(GrpcCode::kDeadlineExceeded));
  EXPECT_NE(c.answers[id].message().find("--grpc-stream-idle-timeout"), std::string::npos);
}

TEST(GrpcSession, ADeadlineCancelsTheCall) {
  Server s;
  Client c;
  const int32_t id = c.Open("/t.S/Unary", {{"grpc-timeout", "1S"}});
  c.Send(id, "x");
  c.End(id);
  c.Exchange(*s.session);
  ASSERT_EQ(s.work.size(), 1u);
  s.session->Expire(GrpcClock::now() + 2s);
  c.Exchange(*s.session);
  EXPECT_TRUE(s.work[0].info->is_cancelled());
  EXPECT_EQ(c.answers[id].status(), static_cast<int>(GrpcCode::kDeadlineExceeded));
}

TEST(GrpcSession, CallsBeyondTheServerWideCapAreRefused) {
  GrpcOptions o;
  o.max_streams = 2;
  Server s(o);
  Client c;
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(c.Open("/t.S/Stream"));
  c.Exchange(*s.session);
  EXPECT_FALSE(c.answers[ids[0]].status());
  EXPECT_FALSE(c.answers[ids[1]].status());
  EXPECT_EQ(c.answers[ids[2]].status(), static_cast<int>(GrpcCode::kResourceExhausted));
  EXPECT_EQ(s.open_streams, 2);
}

TEST(GrpcSession, AWatchSendsOnlyChanges) {
  Server s;
  int value = 0;
  s.methods["/t.S/Watch"].handle = [&](const GrpcCallInfo&, const std::string&) {
    return GrpcReply::Ok(std::to_string(value));
  };
  Client c;
  const int32_t id = c.Open("/t.S/Watch");
  c.Send(id, "");
  c.End(id);
  c.Exchange(*s.session);
  auto poll = [&] {
    s.RunOne();
    c.Exchange(*s.session);
    s.session->Expire(*s.session->NextWake());
  };
  poll();
  poll();  // unchanged: nothing sent
  value = 1;
  poll();
  EXPECT_EQ(Messages(c.answers[id].data), (std::vector<std::string>{"0", "1"}));
  EXPECT_FALSE(c.answers[id].closed);
}

TEST(ResetAccount, AllowsABurstThenTheRate) {
  ResetAccount a(10);
  auto t = GrpcClock::now();
  for (int i = 0; i < 10; ++i) {
    a.OnCompleted(t);
    EXPECT_TRUE(a.OnReset(t)) << i;
  }
  EXPECT_FALSE(a.OnReset(t));  // the burst is spent
  ResetAccount b(10);
  for (int i = 0; i < 100; ++i) {
    t += 200ms;  // 5 a second, each after a completed call
    b.OnCompleted(t);
    EXPECT_TRUE(b.OnReset(t)) << i;
  }
}

TEST(ResetAccount, WeighsResetsAgainstCompletedCalls) {
  ResetAccount a(10);
  auto t = GrpcClock::now();
  // Slow enough for the rate, but never a call completed: 10 allowed, then no.
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(a.OnReset(t += 200ms)) << i;
  EXPECT_FALSE(a.OnReset(t += 200ms));
}

}  // namespace
}  // namespace bertrt::server

// HttpServer's connections (http_server.h): Boost.Beast over Asio. Each
// connection is a chain of asynchronous steps on one I/O thread: wait for a
// request's header (its deadline counts from the accept or the last answer),
// check the header, read the body (a deadline of its own, the payload limit
// counted as bytes arrive), undo its Content-Encoding, then hand the request
// to a handler thread (which sends the answer as far as the socket takes it)
// and watch the socket for a reset until the answer comes back; write the
// rest, and read the next request (pipelined ones are in the buffer
// already) or close. A refused request is answered and its connection closed
// the lingering way: its unread body could not be told from the next request.
// clang-format off
#include <utility>  // ahead of Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "server/common/io_context_pool.h"
#include "server/common/request_log.h"
#include "server/http/handler_pool.h"
#include "server/http/http_codec.h"
#include "server/http/http_server.h"

namespace bertrt::server {
using serving::ModelRegistry;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

namespace {

// A request's header, request line included; beyond: 431.
constexpr uint32_t kHeaderLimit = 64 << 10;
// The most a connection buffers of what it has not parsed yet. Body bytes
// move on to the body as they come (counted against the payload limit), but
// a chunk's header line (its size and extensions) and a chunked body's
// trailer are parsed whole, so without this cap a 400 MB chunk extension or
// trailer was buffered whole too (issue 44, D2): past it, 400.
constexpr size_t kReadBufferLimit = kHeaderLimit + (16 << 10);
// How long a closing connection reads what the client still sends before
// closing, so that the answer is not destroyed by a reset (nginx and
// Apache's lingering close).
constexpr auto kLingerTime = std::chrono::seconds(2);

std::string ErrorJson(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

struct ConnectionBase {
  virtual ~ConnectionBase() = default;
  // Closes the connection if it waits for a request; else once its answer
  // is written.
  virtual void Stop() = 0;
};

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServer& s)
      : server(s),
        options(s.options()),
        io(options.io_threads),
        pool("http-handler", std::max(1, options.handler_threads),
             std::max(1, options.max_handler_threads)) {}

  void Accept();
  template <class Stream>
  void Open(Stream stream, asio::io_context& context, const std::string& remote);

  HttpServer& server;
  const HttpOptions& options;
  IoContextPool io;
  std::optional<asio::ssl::context> tls;
  // The acceptor and its retry timer run on the first I/O thread.
  tcp::acceptor acceptor{io.first()};
  asio::steady_timer accept_retry{io.first()};
  HandlerPool pool;
  std::atomic<bool> stopping{false};
  std::mutex mu;  // guards connections
  std::unordered_map<ConnectionBase*, std::weak_ptr<ConnectionBase>> connections;
};

namespace {

template <class Stream>
class Connection : public ConnectionBase, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Connection(HttpServer::Impl& impl, Stream stream, asio::io_context& context,
             std::string remote)
      : impl_(impl),
        context_(context),
        options_(impl.options),
        stream_(std::move(stream)),
        remote_(std::move(remote)) {}

  ~Connection() override {
    std::lock_guard lock(impl_.mu);
    impl_.connections.erase(this);
  }

  void Start() {
    if constexpr (kTls) {
      Lowest().expires_after(options_.header_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Close();
                                self->ReadHeader();
                              });
    } else {
      ReadHeader();
    }
  }

  void Stop() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->state_ == State::kReading) self->Close();
    });
  }

 private:
  enum class State { kReading, kHandling, kWriting, kClosing };

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void ReadHeader() {
    state_ = State::kReading;
    if (impl_.stopping) return Close();
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(options_.max_payload_bytes);
    Lowest().expires_after(options_.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      // The client closed or reset between requests, or the deadline passed
      // (Beast has closed the socket then), or Stop() closed it.
      if (ec == http::error::end_of_stream || ec == asio::error::eof ||
          ec == beast::error::timeout || ec == asio::error::operation_aborted ||
          ec == asio::error::connection_reset || ec == asio::ssl::error::stream_truncated)
        return Close();
      if (ec == http::error::header_limit)
        return AnswerAndClose(
            431, "the request's header is larger than " + std::to_string(kHeaderLimit) + " bytes");
      if (ec == http::error::body_limit)  // a declared Content-Length: refused unread
        return AnswerAndClose(413, PayloadTooLarge(options_.max_payload_bytes));
      // Either would frame the body two ways (request smuggling behind a
      // proxy that reads the other one).
      if (ec == http::error::bad_content_length)
        return AnswerAndClose(400,
                              "conflicting Content-Length headers, or one that is not a byte "
                              "count; send one");
      if (ec == http::error::bad_transfer_encoding)
        return AnswerAndClose(400,
                              "both Content-Length and Transfer-Encoding (or Transfer-Encoding "
                              "twice); send one");
      return AnswerAndClose(400, "malformed HTTP request: " + ec.message());
    }
    start_ = std::chrono::steady_clock::now();
    const auto& msg = parser_->get();
    const bool chunked = parser_->chunked();
    const auto length = parser_->content_length();
    if (length && *length > options_.max_payload_bytes)
      return AnswerAndClose(413, PayloadTooLarge(options_.max_payload_bytes));
    const auto method = msg.method();
    const bool takes_body =
        method == http::verb::post || method == http::verb::put || method == http::verb::patch;
    if (!takes_body && (chunked || (length && *length > 0)))
      return AnswerAndClose(400, std::string(msg.method_string()) +
                                     " requests carry no body here; send it with POST");
    const std::string_view target(msg.target().data(), msg.target().size());
    if (target.size() > kMaxTargetBytes)
      return AnswerAndClose(414, "the request target is longer than " +
                                     std::to_string(kMaxTargetBytes) +
                                     " bytes; no route takes one that long");
    request_ = std::make_shared<HttpRequest>();
    request_->method = std::string(msg.method_string());
    request_->path = PercentDecoded(target.substr(0, target.find('?')));
    for (const auto& field : msg)
      request_->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    request_->remote_addr = remote_;
    // Routed and authorized before the body is read: an unauthorized client
    // gets nothing read, inflated or parsed for it.
    HttpResponse refusal;
    route_ = impl_.server.Admit(*request_, refusal);
    if (!route_) return Refuse(std::move(refusal));
    if (parser_->is_done()) return OnBody({});
    if (beast::iequals(msg[http::field::expect], "100-continue")) {
      // curl asks before sending a body over 1 MB and waits a second for this.
      auto go_on = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                      msg.version());
      return http::async_write(
          stream_, *go_on, [self = this->shared_from_this(), go_on](beast::error_code ec, size_t) {
            if (ec) return self->Close();
            self->ReadBody();
          });
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(options_.body_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::body_limit)
      return AnswerAndClose(413, PayloadTooLarge(options_.max_payload_bytes));
    if (ec == http::error::buffer_overflow)
      return AnswerAndClose(400,
                            "a chunk's header line (its size and extensions) or the "
                            "chunked body's trailer is larger than " +
                                std::to_string(kReadBufferLimit) + " bytes");
    if (ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == http::error::partial_message || ec == asio::error::eof ||
        ec == http::error::end_of_stream || ec == asio::error::connection_reset)
      return Close();  // the client stopped sending, or went
    if (ec)
      return AnswerAndClose(
          400, "the request body could not be read (bad chunked encoding?): " + ec.message());
    auto req = std::move(request_);
    auto& msg = parser_->get();
    req->body = std::move(msg.body());
    const std::string encoding(msg[http::field::content_encoding]);
    if (!encoding.empty() && !beast::iequals(encoding, "identity")) {
      if (!beast::iequals(encoding, "gzip") && !beast::iequals(encoding, "x-gzip") &&
          !beast::iequals(encoding, "deflate"))
        return AnswerAndClose(
            415, "Content-Encoding \"" + encoding + "\" is not supported (gzip and deflate are)");
      auto inflated = Inflate(req->body, options_.max_payload_bytes);
      if (!inflated.ok())
        return AnswerAndClose(HttpStatusFor(inflated.status()), inflated.status().message());
      req->body = std::move(*inflated);
    }
    keep_alive_ = msg.keep_alive();
    version_ = msg.version();
    parser_.reset();
    Handle(std::move(req));
  }

  // Runs the request on a handler thread; the answer comes back here.
  void Handle(std::shared_ptr<HttpRequest> req) {
    state_ = State::kHandling;
    auto gone = std::make_shared<std::atomic<bool>>(false);
    req->client_gone = [gone] { return gone->load(std::memory_order_relaxed); };
    gone_ = gone;
    WatchClient();
    // Keeps the I/O threads running until the answer is posted back, though
    // the connection may have no operation pending meanwhile.
    auto work = asio::make_work_guard(context_);
    impl_.pool.enqueue([self = this->shared_from_this(), req, route = route_, work]() mutable {
      HttpResponse res;
      res.set_header("X-Request-Id", RequestId(req->get_header_value("X-Request-Id")));
      self->impl_.server.Dispatch(*route, *req, res);
      // The answer is serialized, and over plain TCP sent as far as the
      // socket takes it, here on the handler thread: handlers run in
      // parallel, while the few I/O threads would otherwise write a whole
      // batch's answers one after another (a batch of 64 short answers,
      // each a send that also runs the loopback peer's receive, queued ~1 ms
      // behind each other on two I/O threads: issue 50's profile).
      const bool close = !self->keep_alive_ || self->impl_.stopping;
      auto out = self->BuildMessage(std::move(res), close, req->method == "HEAD");
      auto serializer = std::make_shared<Serializer>(*out);
      beast::error_code ec;
      if constexpr (!kTls) self->SendNow(*serializer, ec);
      asio::post(self->stream_.get_executor(), [self, req, out, serializer, ec, close] {
        self->Respond(*req, out, serializer, ec, close);
      });
      work.reset();
    });
  }

  // While the handler runs: a reset or an error on the socket means the
  // client has gone, and the scheduler drops its request. A close (FIN,
  // TLS's close_notify before it or not) only with cancel_on_close: the
  // server cannot tell it from a half-close, after which HTTP lets a client
  // still read its answer. Bytes waiting (a pipelined request, or a TLS
  // record) are read after this request's answer; meanwhile the socket is
  // looked at every kRecheck for a close behind them.
  void WatchClient() {
    Lowest().socket().async_wait(tcp::socket::wait_read,
                                 [self = this->shared_from_this()](beast::error_code ec) {
                                   if (!ec) self->LookAtClient();
                                 });
  }

  void LookAtClient() {
    if (state_ != State::kHandling) return;
    pollfd p{Lowest().socket().native_handle(), POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) < 0) return WatchClient();
    if (p.revents & (POLLERR | POLLHUP)) return gone_->store(true, std::memory_order_relaxed);
    if (p.revents & POLLRDHUP) {
      if (options_.cancel_on_close) gone_->store(true, std::memory_order_relaxed);
      return;
    }
    if (!(p.revents & POLLIN)) return WatchClient();
    constexpr auto kRecheck = std::chrono::milliseconds(50);
    watch_timer_.expires_after(kRecheck);
    watch_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) self->LookAtClient();
    });
  }

  using Message = http::response<http::string_body>;
  using Serializer = http::serializer<false, http::string_body>;

  // Back on the connection's I/O thread with a handled request's answer, written
  // in part or whole by SendNow (`send_error`: where it failed): the rest is
  // written from here.
  void Respond(const HttpRequest& req, std::shared_ptr<Message> out,
               std::shared_ptr<Serializer> serializer, beast::error_code send_error, bool close) {
    beast::error_code ignored;
    Lowest().socket().cancel(ignored);  // the watch
    watch_timer_.cancel();
    if (options_.log_requests)
      Log(req.method, req.path, req.get_header_value("traceparent"), out->result_int(),
          std::string((*out)["X-Request-Id"]));
    if (send_error) return Close();
    WriteRest(std::move(out), std::move(serializer), close);
  }

  // Writes as much of the answer as the socket's buffer takes at once,
  // without waiting; a client that reads slowly is then served by the I/O
  // thread, not this one. Called on the handler thread while the request is
  // handled: then nothing else writes to the connection, nor closes it (Stop
  // and the watch leave a handled request's connection open), so its
  // descriptor is this connection's.
  void SendNow(Serializer& serializer, beast::error_code& ec) {
    const int fd = Lowest().socket().native_handle();
    bool all_taken = true;
    while (!serializer.is_done() && all_taken) {
      size_t sent = 0;
      serializer.next(ec, [&](beast::error_code& error, const auto& buffers) {
        std::array<iovec, 16> iov;
        size_t n = 0, offered = 0;
        for (const auto b : beast::buffers_range_ref(buffers)) {
          if (n == iov.size()) break;
          iov[n++] = {const_cast<void*>(b.data()), b.size()};
          offered += b.size();
        }
        msghdr msg{};
        msg.msg_iov = iov.data();
        msg.msg_iovlen = n;
        const ssize_t r = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0) {
          sent = static_cast<size_t>(r);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          error = beast::error_code(errno, boost::system::system_category());
        }
        all_taken = sent == offered;
      });
      if (ec) return;
      serializer.consume(sent);
    }
  }

  // A request the route table refused (404, 405, 401, 414), answered
  // before its body: the connection stays open when it has no body, as after
  // any answer; a body left unread closes it (what follows cannot be framed).
  void Refuse(HttpResponse res) {
    res.set_header("X-Request-Id", RequestId(request_->get_header_value("X-Request-Id")));
    const bool unread_body = !parser_->is_done();
    keep_alive_ = parser_->get().keep_alive();
    version_ = parser_->get().version();
    if (options_.log_requests)
      Log(request_->method, request_->path, request_->get_header_value("traceparent"),
          res.status, res.get_header_value("X-Request-Id"));
    const bool head = request_->method == "HEAD";
    request_.reset();
    parser_.reset();
    Write(std::move(res), unread_body || !keep_alive_ || impl_.stopping, head);
  }

  // The request's access log line.
  void Log(const std::string& method, const std::string& path, const std::string& traceparent,
           int status, const std::string& request_id) {
    nlohmann::json line = {{"request_id", request_id},
                           {"protocol", "http"},
                           {"method", method},
                           {"path", path},
                           {"status", status},
                           {"remote", remote_}};
    AddTraceContext(line, traceparent);
    LogRequest(std::move(line), start_);
  }

  // A request refused before a handler saw it: answered, then the
  // connection closed (what follows cannot be framed).
  void AnswerAndClose(int status, const std::string& message) {
    HttpResponse res;
    res.status = status;
    const bool have_header = parser_ && parser_->is_header_done();
    res.set_header("X-Request-Id",
                   RequestId(have_header ? std::string(parser_->get()["X-Request-Id"]) : ""));
    // On the TEI and OpenAI routes, in their error shapes.
    const std::string target = have_header ? std::string(parser_->get().target()) : "";
    res.set_content(IsTeiPath(target) ? TeiErrorJson(target, status, message).dump(
                                            -1, ' ', false, json::error_handler_t::replace)
                                      : ErrorJson(message),
                    "application/json");
    if (!have_header) version_ = 11;
    Write(std::move(res), true);
  }

  // `head`: the answer to HEAD, its headers (Content-Length included) as
  // GET's, without the body.
  void Write(HttpResponse res, bool close, bool head = false) {
    auto out = BuildMessage(std::move(res), close, head);
    auto serializer = std::make_shared<Serializer>(*out);
    WriteRest(std::move(out), std::move(serializer), close);
  }

  // Writes what `serializer` has not written yet of `out`, then AfterWrite.
  void WriteRest(std::shared_ptr<Message> out, std::shared_ptr<Serializer> serializer,
                 bool close) {
    state_ = State::kWriting;
    if (serializer->is_done()) return AfterWrite(close);
    // A client that does not read its answer holds the connection no longer.
    Lowest().expires_after(options_.body_timeout);
    http::async_write(stream_, *serializer,
                      [self = this->shared_from_this(), out, serializer, close](
                          beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        self->AfterWrite(close);
                      });
  }

  // The answer as Beast writes it.
  std::shared_ptr<Message> BuildMessage(HttpResponse res, bool close, bool head) const {
    auto out = std::make_shared<Message>();
    out->version(version_);
    out->result(static_cast<unsigned>(res.status));
    for (auto& [name, value] : res.headers) out->set(name, value);
    out->body() = std::move(res.body);
    out->keep_alive(!close);
    out->prepare_payload();
    if (head) out->body().clear();
    return out;
  }

  // An answer written: the next request, or the close.
  void AfterWrite(bool close) {
    if (close) return LingeringClose();
    ReadHeader();
  }

  // Our side first (the answer, then FIN or close_notify), then what the
  // client still sends is read away until it closes too or kLingerTime
  // passes: closing with unread bytes, or bytes arriving after, resets the
  // connection, which can destroy the answer before the client reads it.
  void LingeringClose() {
    state_ = State::kClosing;
    Lowest().expires_after(kLingerTime);
    if constexpr (kTls) {
      stream_.async_shutdown(
          [self = this->shared_from_this()](beast::error_code) { self->Close(); });
    } else {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Drain();
    }
  }

  void Drain() {
    Lowest().async_read_some(asio::buffer(sink_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) return self->Close();
                               self->Drain();
                             });
  }

  void Close() {
    state_ = State::kClosing;
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  HttpServer::Impl& impl_;
  asio::io_context& context_;  // the I/O thread's, where this connection's steps run
  const HttpOptions& options_;
  Stream stream_;
  const std::string remote_;
  beast::flat_buffer buffer_{kReadBufferLimit};
  std::optional<http::request_parser<http::string_body>> parser_;
  // The request being read (from its header on) and its route.
  std::shared_ptr<HttpRequest> request_;
  const HttpServer::Route* route_ = nullptr;
  State state_ = State::kReading;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::chrono::steady_clock::time_point start_;
  std::shared_ptr<std::atomic<bool>> gone_;
  asio::steady_timer watch_timer_{stream_.get_executor()};
  std::array<char, 16384> sink_;
};

}  // namespace

template <class Stream>
void HttpServer::Impl::Open(Stream stream, asio::io_context& context, const std::string& remote) {
  auto connection =
      std::make_shared<Connection<Stream>>(*this, std::move(stream), context, remote);
  {
    std::lock_guard lock(mu);
    connections.emplace(connection.get(), connection);
  }
  connection->Start();
}

void HttpServer::Impl::Accept() {
  asio::io_context& context = io.next();
  acceptor.async_accept(context, [this, &context](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors, say: try again shortly rather than spin.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) Accept();
      });
      return;
    }
    beast::error_code ignored;
    // Header and body leave as separate segments; with Nagle's algorithm the
    // body would wait for the client's delayed ACK (~40 ms per answer).
    socket.set_option(tcp::no_delay(true), ignored);
    const auto peer = socket.remote_endpoint(ignored);
    const std::string remote = ignored ? "" : peer.address().to_string();
    if (tls)
      Open(beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls),
           context, remote);
    else
      Open(beast::tcp_stream(std::move(socket)), context, remote);
    Accept();
  });
}

HttpServer::HttpServer(ModelRegistry& registry, Metrics& metrics, HttpOptions options)
    : registry_(registry), metrics_(metrics), options_(std::move(options)) {
  AddRoutes();
}

HttpServer::~HttpServer() = default;

Status HttpServer::Bind() {
  impl_ = std::make_unique<Impl>(*this);
  if (!options_.tls.cert.empty()) {
    impl_->tls.emplace(asio::ssl::context::tls_server);
    beast::error_code ec;
    impl_->tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                            asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                            asio::ssl::context::no_tlsv1_1);
    impl_->tls->use_certificate_chain(asio::buffer(options_.tls.cert), ec);
    if (!ec)
      impl_->tls->use_private_key(asio::buffer(options_.tls.key), asio::ssl::context::pem, ec);
    if (ec)
      return InvalidArgument("TLS: the certificate or key was not accepted by the HTTPS server (" +
                             ec.message() + ")");
  }
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  beast::error_code ec;
  tcp::resolver resolver(impl_->io.first());
  const auto endpoints =
      resolver.resolve(options_.host, std::to_string(options_.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty())
    return Unavailable("cannot listen on " + where + " (not an address of this machine)");
  const tcp::endpoint endpoint = *endpoints.begin();
  tcp::acceptor& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Unavailable("cannot listen on " + where +
                       " (in use, or not an address of this machine: " + ec.message() + ")");
  return Status::Ok();
}

void HttpServer::Run() {
  if (!impl_ || !impl_->acceptor.is_open()) return;
  impl_->Accept();
  // On threads of their own, named, though the caller could be one: naming
  // the main thread would rename the process (its comm, as ps shows it).
  for (std::thread& t : impl_->io.Run("http-io")) t.join();
  impl_->pool.shutdown();
}

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->stopping = true;
  asio::post(impl_->io.first(), [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_retry.cancel();
    // Held outside the lock: the last reference may go with them, and a
    // connection's destructor takes the lock.
    std::vector<std::shared_ptr<ConnectionBase>> open;
    {
      std::lock_guard lock(impl->mu);
      for (auto& [raw, weak] : impl->connections)
        if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
    for (auto& connection : open) connection->Stop();
    impl->io.Release();
  });
}

}  // namespace bertrt::server

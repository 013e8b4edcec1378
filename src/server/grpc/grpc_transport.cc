// GrpcTransport (grpc_transport.h): each connection is a chain of
// asynchronous steps on one I/O thread (IoContextPool): the TLS handshake (ALPN h2), then
// read -> GrpcSession::Receive -> Send -> write, a timer for the session's
// deadlines, and handlers' replies posted back. Reading stops while the
// client does not take what is written to it (GrpcSession::Backlogged), and a
// write that makes no progress for kWriteStallTimeout closes the connection.
// A connection whose session is done (GOAWAY sent, no call left) closes the
// lingering way: its last frames are not lost to a reset.
// clang-format off
#include <utility>  // ahead of Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on
#include "server/grpc/grpc_transport.h"

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/common/io_context_pool.h"
#include "server/grpc/grpc_session.h"
#include "server/http/handler_pool.h"

namespace bertrt::server {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// A write (to a client that reads) that takes longer than this means the
// client stopped reading: the connection closes.
constexpr auto kWriteStallTimeout = std::chrono::seconds(30);
// What one read takes in and one write sends at most.
constexpr size_t kReadBytes = 16 << 10;
constexpr size_t kWriteBytes = 64 << 10;
// How long a finished connection reads (and drops) what the client still
// sends before closing, so that closing with unread bytes does not reset the
// connection before the client reads the GOAWAY (nginx's lingering close).
constexpr auto kLingerTime = std::chrono::seconds(2);

struct ConnectionBase {
  virtual ~ConnectionBase() = default;
  virtual void GracefulStop() = 0;
  virtual void Abort() = 0;
};

// ALPN: HTTP/2 or nothing (gRPC clients offer "h2"; one that offers no ALPN
// at all is taken to speak HTTP/2 by prior knowledge).
int SelectH2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
             unsigned int inlen, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kH2, sizeof(kH2), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

std::string Peer(const tcp::socket& socket) {
  error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return "";
  const std::string port = std::to_string(peer.port());
  if (peer.address().is_v6()) return "ipv6:[" + peer.address().to_string() + "]:" + port;
  return "ipv4:" + peer.address().to_string() + ":" + port;
}

}  // namespace

struct GrpcTransport::Impl {
  Impl(const GrpcOptions& o, GrpcMethodLookup m)
      : options(o),
        methods(std::move(m)),
        io(o.io_threads),
        pool("grpc-handler", std::max(1, o.handler_threads), std::max(1, o.max_threads)) {}

  void Accept();
  template <class Socket>
  void Open(Socket socket, asio::io_context& context, std::string peer);
  // Connection destructors: the last one to close during a stop ends the grace early.
  void Closed(ConnectionBase* connection);

  const GrpcOptions& options;
  GrpcMethodLookup methods;
  IoContextPool io;
  // The acceptor, the grace timer and the connection list's walks run on the
  // first I/O thread (control), so one at a time.
  asio::io_context& control = io.first();
  std::optional<asio::ssl::context> tls;
  tcp::acceptor acceptor{control};
  asio::steady_timer accept_retry{control}, grace{control};
  HandlerPool pool;
  std::atomic<int> open_streams{0};
  std::vector<std::thread> threads;
  std::mutex mu;  // guards connections and stopping
  std::unordered_map<ConnectionBase*, std::weak_ptr<ConnectionBase>> connections;
  bool stopping = false;
};

namespace {

template <class Socket>
class Connection : public ConnectionBase, public std::enable_shared_from_this<Connection<Socket>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Socket, tcp::socket>;

  Connection(GrpcTransport::Impl& impl, Socket socket, asio::io_context& context,
             std::string peer)
      : impl_(impl), context_(context), socket_(std::move(socket)), peer_(std::move(peer)) {}

  ~Connection() override { impl_.Closed(this); }

  void Start() {
    if constexpr (kTls) {
      io_deadline_.expires_after(kPrefaceTimeout);
      io_deadline_.async_wait([self = this->shared_from_this()](error_code ec) {
        if (!ec && !self->session_) self->Close();  // still shaking hands
      });
      socket_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](error_code ec) {
                                self->io_deadline_.cancel();
                                if (ec || self->closed_) return self->Close();
                                self->Begin();
                              });
    } else {
      Begin();
    }
  }

  void GracefulStop() override {
    asio::post(executor(), [self = this->shared_from_this()] {
      if (!self->session_) {
        if (!self->lingering_) self->Close();  // still in its TLS handshake
        return;
      }
      self->session_->Shutdown();
      self->Flush();
    });
  }

  void Abort() override {
    asio::post(executor(), [self = this->shared_from_this()] { self->Close(); });
  }

 private:
  auto executor() { return socket_.get_executor(); }
  tcp::socket& Lowest() {
    if constexpr (kTls)
      return socket_.next_layer();
    else
      return socket_;
  }

  void Begin() {
    auto weak = this->weak_from_this();
    session_.emplace(
        impl_.options, impl_.methods,
        [weak](GrpcWork work) {
          if (auto self = weak.lock()) self->Run(std::move(work));
        },
        impl_.open_streams, peer_);
    if (!session_->Start().ok()) return Close();
    Flush();
    Arm();
    MaybeRead();
  }

  // Runs a call's handler: on this I/O thread when it is cheap, else on the pool.
  void Run(GrpcWork work) {
    auto self = this->shared_from_this();
    if (work.method->on_io_thread) {
      asio::post(executor(),
                 [self, work = std::move(work)] { self->OnReply(work.stream_id, Handle(work)); });
      return;
    }
    impl_.pool.enqueue([self, work = std::move(work), guard = asio::make_work_guard(context_)] {
      GrpcReply reply = Handle(work);
      asio::post(self->executor(), [self, id = work.stream_id, reply = std::move(reply)]() mutable {
        self->OnReply(id, std::move(reply));
      });
    });
  }

  static GrpcReply Handle(const GrpcWork& work) {
    try {
      return work.method->handle(*work.info, work.request);
    } catch (const std::exception& e) {
      return GrpcReply::Error(GrpcCode::kInternal, std::string("internal error: ") + e.what());
    }
  }

  void OnReply(int32_t stream_id, GrpcReply reply) {
    if (!session_) return;
    session_->Complete(stream_id, std::move(reply));
    Flush();
    Arm();
    MaybeRead();
  }

  void MaybeRead() {
    if (reading_ || !session_ || !session_->WantsRead()) return;
    if (writing_ && session_->Backlogged()) return;  // OnWrite reads again
    reading_ = true;
    socket_.async_read_some(
        asio::buffer(in_),
        [self = this->shared_from_this()](error_code ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(error_code ec, size_t n) {
    reading_ = false;
    if (ec || closed_) return Close();
    if (!session_) return Drain();
    if (!session_->Receive(in_.data(), n).ok()) return Close();
    Flush();
    Arm();
    MaybeRead();
  }

  void Flush() {
    if (writing_ || !session_) return;
    out_.clear();
    if (!session_->Send(out_, kWriteBytes).ok()) return Close();
    if (out_.empty()) {
      if (session_->Done()) return Linger();
      // An idle connection keeps no write buffer.
      if (out_.capacity() > kReadBytes) std::string().swap(out_);
      return;
    }
    writing_ = true;
    io_deadline_.expires_after(kWriteStallTimeout);
    io_deadline_.async_wait([self = this->shared_from_this()](error_code ec) {
      // (A deadline moved on by a later write has not passed.)
      if (!ec && self->writing_ &&
          self->io_deadline_.expiry() <= asio::steady_timer::clock_type::now())
        self->Close();
    });
    asio::async_write(
        socket_, asio::buffer(out_),
        [self = this->shared_from_this()](error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(error_code ec) {
    writing_ = false;
    io_deadline_.cancel();
    if (ec) return Close();
    Flush();
    MaybeRead();
  }

  // The session's next deadline (a call's grpc-timeout, an idle call, a watch
  // to poll), on one timer.
  void Arm() {
    if (!session_) return;
    const auto wake = session_->NextWake();
    if (!wake || (armed_ && *armed_ <= *wake)) return;
    armed_ = *wake;
    timer_.expires_at(*wake);
    timer_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || !self->session_) return;
      self->armed_.reset();
      self->session_->Expire(GrpcClock::now());
      self->Flush();
      self->Arm();
    });
  }

  // Our side is done: FIN, then what the client still sends is read and
  // dropped until it closes too or kLingerTime passes.
  void Linger() {
    lingering_ = true;
    session_.reset();
    timer_.cancel();
    error_code ignored;
    Lowest().shutdown(tcp::socket::shutdown_send, ignored);
    io_deadline_.expires_after(kLingerTime);
    io_deadline_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (!ec) self->Close();
    });
    if (!reading_) Drain();
  }

  void Drain() {
    reading_ = true;
    socket_.async_read_some(asio::buffer(in_),
                            [self = this->shared_from_this()](error_code ec, size_t) {
                              self->reading_ = false;
                              if (ec || self->closed_) return self->Close();
                              self->Drain();
                            });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    timer_.cancel();
    io_deadline_.cancel();
    Lowest().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close(ignored);
    // Calls still open are cancelled (their handlers' replies find no session).
    session_.reset();
  }

  GrpcTransport::Impl& impl_;
  asio::io_context& context_;  // the I/O thread's, where this connection's steps run
  Socket socket_;
  const std::string peer_;
  std::optional<GrpcSession> session_;
  std::array<uint8_t, kReadBytes> in_;
  std::string out_;
  bool reading_ = false, writing_ = false, lingering_ = false, closed_ = false;
  asio::steady_timer timer_{socket_.get_executor()};
  std::optional<GrpcClock::time_point> armed_;
  // The TLS handshake's deadline, then each write's.
  asio::steady_timer io_deadline_{socket_.get_executor()};
};

}  // namespace

template <class Socket>
void GrpcTransport::Impl::Open(Socket socket, asio::io_context& context, std::string peer) {
  auto connection =
      std::make_shared<Connection<Socket>>(*this, std::move(socket), context, std::move(peer));
  {
    std::lock_guard lock(mu);
    connections.emplace(connection.get(), connection);
  }
  connection->Start();
}

void GrpcTransport::Impl::Closed(ConnectionBase* connection) {
  std::lock_guard lock(mu);
  connections.erase(connection);
  if (stopping && connections.empty()) asio::post(control, [this] { grace.cancel(); });
}

void GrpcTransport::Impl::Accept() {
  asio::io_context& context = io.next();
  acceptor.async_accept(context, [this, &context](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors, say: try again shortly rather than spin.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code e) {
        if (!e) Accept();
      });
      return;
    }
    size_t open;
    {
      std::lock_guard lock(mu);
      open = connections.size();
    }
    error_code ignored;
    if (open >= static_cast<size_t>(options.max_connections)) {
      socket.close(ignored);  // --grpc-max-connections
    } else {
      // Frames are small and many; Nagle's algorithm would hold answers for
      // the client's delayed ACK.
      socket.set_option(tcp::no_delay(true), ignored);
      std::string peer = Peer(socket);
      if (tls)
        Open(asio::ssl::stream<tcp::socket>(std::move(socket), *tls), context, std::move(peer));
      else
        Open(std::move(socket), context, std::move(peer));
    }
    Accept();
  });
}

GrpcTransport::GrpcTransport(const GrpcOptions& options, GrpcMethodLookup methods)
    : impl_(std::make_unique<Impl>(options, std::move(methods))) {}

GrpcTransport::~GrpcTransport() {
  // Without an earlier Stop (an error path), open calls are cut at once.
  Stop(std::chrono::milliseconds(0));
  Wait();
}

Status GrpcTransport::Start() {
  Impl& impl = *impl_;
  const GrpcOptions& options = impl.options;
  if (!options.tls.cert.empty()) {
    impl.tls.emplace(asio::ssl::context::tls_server);
    error_code ec;
    impl.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                          asio::ssl::context::no_tlsv1_1);
    impl.tls->use_certificate_chain(asio::buffer(options.tls.cert), ec);
    if (!ec) impl.tls->use_private_key(asio::buffer(options.tls.key), asio::ssl::context::pem, ec);
    if (ec)
      return InvalidArgument("TLS: the certificate or key was not accepted by the gRPC server (" +
                             ec.message() + ")");
    SSL_CTX_set_alpn_select_cb(impl.tls->native_handle(), SelectH2, nullptr);
  }
  const std::string address = options.host + ":" + std::to_string(options.port);
  const Status cannot_listen =
      Unavailable("cannot listen for gRPC on " + address +
                  " (in use, or not an address of this machine); pick another --grpc-port or 0 "
                  "to turn gRPC off");
  error_code ec;
  tcp::resolver resolver(impl.io.first());
  const auto endpoints =
      resolver.resolve(options.host, std::to_string(options.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) return cannot_listen;
  const tcp::endpoint endpoint = *endpoints.begin();
  impl.acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(endpoint, ec);
  if (!ec) impl.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return cannot_listen;
  asio::post(impl.control, [&impl] { impl.Accept(); });
  impl.threads = impl.io.Run("grpc-io");
  return Status::Ok();
}

void GrpcTransport::Stop(std::chrono::milliseconds grace) {
  Impl& impl = *impl_;
  asio::post(impl.control, [&impl, grace] {
    error_code ignored;
    impl.acceptor.close(ignored);
    impl.accept_retry.cancel();
    std::vector<std::shared_ptr<ConnectionBase>> open;
    {
      std::lock_guard lock(impl.mu);
      if (impl.stopping) return;
      impl.stopping = true;
      for (auto& [raw, weak] : impl.connections)
        if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
    impl.io.Release();  // the first I/O thread also waits for the grace timer
    if (open.empty()) return;
    for (auto& connection : open) connection->GracefulStop();
    impl.grace.expires_after(grace);
    impl.grace.async_wait([&impl](error_code ec) {
      if (ec) return;
      std::vector<std::shared_ptr<ConnectionBase>> left;
      {
        std::lock_guard lock(impl.mu);
        for (auto& [raw, weak] : impl.connections)
          if (auto connection = weak.lock()) left.push_back(std::move(connection));
      }
      for (auto& connection : left) connection->Abort();
    });
  });
}

void GrpcTransport::Wait() {
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->pool.shutdown();
}

}  // namespace bertrt::server

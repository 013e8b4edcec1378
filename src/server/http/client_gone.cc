#include "server/http/client_gone.h"

#include <dirent.h>
#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace bertrt::server {
namespace {

int PortOf(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

// The numeric host of a socket address, as httplib writes it into
// Request::remote_addr (getnameinfo, NI_NUMERICHOST).
std::string HostOf(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return {};
  return host;
}

// Whether `fd` is the connection `req` came in on: ports first, which
// rules out every other descriptor cheaply, then the peer's address.
bool IsConnectionOf(int fd, const httplib::Request& req) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      PortOf(addr) != req.local_port)
    return false;
  len = sizeof(addr);
  return getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         PortOf(addr) == req.remote_port && HostOf(addr, len) == req.remote_addr;
}

// The socket of a plain HTTP request. A handler thread serves one connection
// at a time, so its last answer is checked first; otherwise the process's
// open descriptors are searched.
int PlainConnectionSocket(const httplib::Request& req) {
  thread_local int last = -1;
  if (last >= 0 && IsConnectionOf(last, req)) return last;
  last = -1;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || end == entry->d_name || fd == dirfd(dir)) continue;
    if (IsConnectionOf(static_cast<int>(fd), req)) {
      last = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return last;
}

// A TLS record starts with its type (1 byte), version (2) and length (2).
constexpr int kTlsRecordHeader = 5;

// Whether the bytes waiting on a TLS connection whose handler is busy with
// its request end the stream: the client's close_notify alert rather than a
// pipelined request. Only a record that can be an alert is opened: TLS 1.2
// shows the alert type, but TLS 1.3 encrypts every record under one outer
// type, and there an alert takes 19 bytes (2, its type byte and a 16-byte
// tag) where no HTTP request fits in 32. SSL_peek processes the record and
// reports the alert as the stream's end. It would also move a pipelined
// request from the socket into OpenSSL's buffer, where httplib's keep-alive
// wait, which polls the socket, would not see it: hence the size test. The
// socket is non-blocking meanwhile, so that an incomplete record returns
// instead of waiting. The handler thread, which owns `ssl`, is blocked on the
// request while the watcher looks. `header` is the waiting record's header.
bool TlsStreamEnded(SSL* ssl, int fd, const unsigned char (&header)[kTlsRecordHeader]) {
  constexpr unsigned char kAlert = 21, kApplicationData = 23;
  constexpr int kLargestTls13Alert = 32;
  const int length = header[3] << 8 | header[4];
  if (header[0] != kAlert && !(header[0] == kApplicationData && length <= kLargestTls13Alert))
    return false;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
  ERR_clear_error();
  char byte;
  const int n = SSL_peek(ssl, &byte, 1);
  const int error = n > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl, n);
  fcntl(fd, F_SETFL, flags);
  ERR_clear_error();  // this thread's queue: nothing of it reaches the handler's
  // Closed with the alert; closed or reset without it; a broken record.
  return error == SSL_ERROR_ZERO_RETURN || error == SSL_ERROR_SYSCALL || error == SSL_ERROR_SSL;
}

// Whether the bytes waiting on `fd` (or its closing) end the client's
// stream: 0 bytes is the peer's close, an error other than "nothing to
// read" a reset; over TLS, a whole record header may be a close_notify.
bool StreamEnded(int fd, SSL* ssl) {
  unsigned char header[kTlsRecordHeader];
  const ssize_t n = recv(fd, header, sizeof(header), MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
         (n == kTlsRecordHeader && ssl && TlsStreamEnded(ssl, fd, header));
}

}  // namespace

struct ClientWatchState {
  int fd;
  SSL* ssl;
  uint64_t id;
  std::atomic<bool> gone{false};
  std::mutex mu;  // held by a look at the socket, and by the watch's end
  bool watching = true;
};

namespace {

// The process's watcher thread and its epoll set. Each socket is armed
// once (EPOLLONESHOT): on a close, hang-up or error it is gone; bytes that
// do not end the stream (a pipelined request, a TLS record other than an
// alert) re-arm it for the close alone, so that it does not fire again for
// the same bytes.
class Watcher {
 public:
  static Watcher* Get() {
    static Watcher* w = [] {
      auto* watcher = new Watcher();  // lives as long as the process
      if (watcher->epoll_ < 0) return static_cast<Watcher*>(nullptr);
      std::thread([watcher] { watcher->Loop(); }).detach();
      return watcher;
    }();
    return w;
  }

  bool Add(const std::shared_ptr<ClientWatchState>& s) {
    std::lock_guard lock(mu_);
    s->id = next_id_++;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.u64 = s->id;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, s->fd, &ev) != 0) return false;
    states_.emplace(s->id, s);
    return true;
  }

  void Remove(const std::shared_ptr<ClientWatchState>& s) {
    {
      // After this no look touches the socket or its SSL object, and the
      // descriptor leaves the set before the connection can close and its
      // number be reused.
      std::lock_guard lock(s->mu);
      s->watching = false;
      epoll_ctl(epoll_, EPOLL_CTL_DEL, s->fd, nullptr);
    }
    std::lock_guard lock(mu_);
    states_.erase(s->id);
  }

 private:
  Watcher() : epoll_(epoll_create1(EPOLL_CLOEXEC)) {}

  void Loop() {
    epoll_event events[64];
    for (;;) {
      const int n = epoll_wait(epoll_, events, 64, -1);
      for (int i = 0; i < n; ++i) {
        std::shared_ptr<ClientWatchState> s;
        {
          std::lock_guard lock(mu_);
          auto it = states_.find(events[i].data.u64);
          if (it == states_.end()) continue;
          s = it->second;
        }
        std::lock_guard lock(s->mu);
        if (!s->watching) continue;
        if ((events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || StreamEnded(s->fd, s->ssl)) {
          s->gone = true;
          continue;
        }
        epoll_event ev{};
        ev.events = EPOLLRDHUP | EPOLLONESHOT;
        ev.data.u64 = s->id;
        epoll_ctl(epoll_, EPOLL_CTL_MOD, s->fd, &ev);
      }
    }
  }

  const int epoll_;
  std::mutex mu_;
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<ClientWatchState>> states_;
};

}  // namespace

int ConnectionSocket(const httplib::Request& req) {
  return req.ssl ? SSL_get_fd(req.ssl) : PlainConnectionSocket(req);
}

ClientWatch::ClientWatch(const httplib::Request& req) {
  const int fd = ConnectionSocket(req);
  Watcher* watcher = Watcher::Get();
  if (fd < 0 || !watcher) return;
  auto state = std::make_shared<ClientWatchState>();
  state->fd = fd;
  // httplib hands handlers the SSL object as const; peeking changes its read
  // state, which the handler's next read continues from.
  state->ssl = const_cast<SSL*>(req.ssl);
  if (watcher->Add(state)) state_ = std::move(state);
}

ClientWatch::~ClientWatch() {
  if (state_) Watcher::Get()->Remove(state_);
}

std::function<bool()> ClientWatch::gone() const {
  if (!state_) return {};
  return [state = state_] { return state->gone.load(std::memory_order_relaxed); };
}

}  // namespace bertrt::server

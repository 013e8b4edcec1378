#include "server/http/client_gone.h"

#include <dirent.h>
#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

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
// request while the scheduler asks. `header` is the waiting record's header.
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

}  // namespace

std::function<bool()> ClientGoneCheck(const httplib::Request& req) {
  const int fd = req.ssl ? SSL_get_fd(req.ssl) : PlainConnectionSocket(req);
  if (fd < 0) return {};
  struct State {
    int fd;
    SSL* ssl;
    std::atomic<bool> gone{false};
    std::atomic<int64_t> next_look_ns{0};
  };
  auto state = std::make_shared<State>();
  state->fd = fd;
  // httplib hands handlers the SSL object as const; peeking changes its read
  // state, which the handler's next read continues from.
  state->ssl = const_cast<SSL*>(req.ssl);
  return [state] {
    if (state->gone) return true;
    // The scheduler asks for every queued request each time it forms a
    // batch: one syscall per request and millisecond at most.
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    if (now < state->next_look_ns) return false;
    state->next_look_ns = now + 1'000'000;
    unsigned char header[kTlsRecordHeader];
    const ssize_t n = recv(state->fd, header, sizeof(header), MSG_PEEK | MSG_DONTWAIT);
    // 0: the peer closed its side; < 0 other than "nothing to read": reset;
    // over TLS, a whole record header: perhaps an alert that closed the stream.
    const bool gone =
        n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
        (n == kTlsRecordHeader && state->ssl && TlsStreamEnded(state->ssl, state->fd, header));
    if (gone) state->gone = true;
    return gone;
  };
}

}  // namespace bertrt::server

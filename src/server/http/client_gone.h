// Whether an HTTP client is still connected, for the scheduler to check before
// it spends compute on the client's request (gRPC has ServerContext::
// IsCancelled for the same). Debian's cpp-httplib 0.11 hands a handler
// neither its socket nor a liveness check, so the socket is found by the
// request's addresses: a TLS request's from its SSL object, a plain one's by
// matching the local and peer address of this process's sockets (once per
// connection and handler thread).
#pragma once

#include <functional>
#include <memory>

namespace httplib {
struct Request;
}

namespace bertrt::server {

struct ClientWatchState;

// Watches the connection of `req` while its request waits in a queue: one
// thread per process (epoll) looks at a socket only when it becomes
// readable or hung up, so that the scheduler's check is a flag read, not a
// syscall per queued request each time a batch is formed (which, under the
// queue's lock, cost the worker ~5% of its throughput at 400 waiting
// requests). A close or reset counts as gone, and so does a half-close (as
// in hyper, which text-embeddings-inference serves with); over TLS, a
// close_notify alert too (read with SSL_peek while the handler waits).
// Destroy the watch before the handler uses the connection again: the
// destructor waits out a look in progress.
class ClientWatch {
 public:
  explicit ClientWatch(const httplib::Request& req);
  ~ClientWatch();
  ClientWatch(const ClientWatch&) = delete;
  ClientWatch& operator=(const ClientWatch&) = delete;

  // Turns true once the client is gone; stays valid after the watch ends
  // (then it no longer changes). Empty when the socket was not found.
  std::function<bool()> gone() const;

 private:
  std::shared_ptr<ClientWatchState> state_;
};

// The socket `req` came in on (a TLS request's from its SSL object), or -1.
int ConnectionSocket(const httplib::Request& req);

}  // namespace bertrt::server

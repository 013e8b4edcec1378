// Whether an HTTP client is still connected, for the scheduler to poll before
// it spends compute on the client's request (gRPC has ServerContext::
// IsCancelled for the same). Debian's cpp-httplib 0.11 hands a handler
// neither its socket nor a liveness check, so the socket is found by the
// request's addresses: a TLS request's from its SSL object, a plain one's by
// matching the local and peer address of this process's sockets (once per
// connection and handler thread).
#pragma once

#include <functional>

namespace httplib {
struct Request;
}

namespace bertrt::server {

// A check that turns true once the client of `req` has closed or reset its
// connection (a half-close counts as gone, as in hyper, which
// text-embeddings-inference serves with). It looks at the socket at most once
// a millisecond, without reading from it. Empty when the socket is not found.
// Over TLS, a close_notify alert counts as gone too (it is read with
// SSL_peek). Call it only while the handler of `req` is waiting on its
// request: it may use the connection's SSL object.
std::function<bool()> ClientGoneCheck(const httplib::Request& req);

}  // namespace bertrt::server

// The HTTP front end: KServe v2, text-embeddings-inference compatible and
// OpenAI-compatible endpoints, /metrics. Decodes JSON to native requests,
// hands them to each model's scheduler, encodes the answers; every error is a
// JSON body {"error": ...} with its 4xx/5xx status.
//
// Connections are Boost.Beast's over Asio: a few I/O threads read, parse and
// write every connection without blocking (an idle or slow connection costs
// no thread), with a deadline for each request's header and body; a parsed
// request runs on a handler thread (HandlerPool: handlers block on the
// batcher), and its connection is watched for a reset meanwhile. Requests
// pipelined on a connection are answered in order.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/metrics.h"
#include "serving/model_registry.h"
#include "server/common/tls.h"
#include "server/http/http_message.h"
#include "server/http/router.h"

namespace bertrt::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  size_t max_payload_bytes = 8 << 20;
  // Handlers block on the batcher, each on a thread of its own (HandlerPool):
  // this many are kept ready, more start on demand up to max_handler_threads
  // (requests beyond wait for one) and end after 30 s idle. Idle and slow
  // connections take none. Few ready: each thread that has run requests keeps
  // its stack pages and malloc's per-thread cache, so 512 of them taking
  // turns made the resident size creep for half an hour (the soak, issue 29).
  int handler_threads = 16;
  int max_handler_threads = 8192;
  // When non-empty, every endpoint but /v2/health/{live,ready} and /metrics
  // needs `Authorization: Bearer <api_key>`; otherwise 401.
  std::string api_key;
  // PEM certificate and key: HTTPS instead of HTTP (checked by LoadTls).
  TlsPem tls;
  // One JSON line per request on stderr: request id (the client's
  // X-Request-Id, else one made here, echoed in the response either way),
  // method, path, status, latency.
  bool log_requests = false;
  // From a connection's accept or last response to the end of the next
  // request's header, and from there to the end of its body (and to write
  // the answer); past either the connection closes. A client that sends a
  // byte a second cannot hold a connection longer.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{60000};
  // Threads that read and write the connections (parsing included), each
  // with the connections it accepted. More cost CPU per request (fewer ready
  // events per wake-up) and did not serve short requests faster on a 16-core
  // GPU machine once answers were sent from the handlers (issue 50).
  int io_threads = 2;
  // A client's close (FIN) while its request is handled drops the request,
  // as a reset always does. Off by default: to the server a close is a
  // half-close, after which HTTP lets a client still read its answer.
  bool cancel_on_close = false;
};

class HttpServer {
 public:
  HttpServer(serving::ModelRegistry& registry, Metrics& metrics, HttpOptions options);
  ~HttpServer();

  // Binds the port (so a caller can log "listening" only when it is true).
  Status Bind();
  // Serves until Stop(); in-flight requests are answered before it returns.
  void Run();
  // Stops accepting, closes idle connections, and has the others closed once
  // their request in flight is answered. Safe from any thread.
  void Stop();

  // Used by the route files.
  serving::ModelRegistry& registry() { return registry_; }
  Metrics& metrics() { return metrics_; }
  const HttpOptions& options() const { return options_; }

  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  struct Route {
    Handler handler;
    std::string endpoint;  // the metrics' label for a refused request
    bool open = false;     // served without the API key
  };

  // Called by the connection once a request's header is read, before its
  // body: the route `req` (method, path, headers) names, its parameters set
  // in req.params; or, with no route, the answer that refuses it (404, 405
  // with Allow, 414, 401 without the API key), so that no body is read or
  // decoded for a request that cannot run.
  const Route* Admit(HttpRequest& req, HttpResponse& refusal) const;
  // Runs an admitted request's route on the calling thread (500 when it throws).
  void Dispatch(const Route& route, const HttpRequest& req, HttpResponse& res) const;

  struct Impl;  // the connections (http_connection.cc)

 private:
  // The route table, filled once by the constructor.
  void AddRoutes();
  void AddKServeRoutes();
  void AddTeiRoutes();
  // Register a route (Router's pattern syntax) behind the API key, when one
  // is set: a request without it gets 401 and counts as a failed `endpoint`
  // request. Open: no key needed.
  void Get(const std::string& pattern, const std::string& endpoint, Handler handler);
  void Post(const std::string& pattern, const std::string& endpoint, Handler handler);
  void GetOpen(const std::string& pattern, Handler handler);

  serving::ModelRegistry& registry_;
  Metrics& metrics_;
  HttpOptions options_;
  Router<Route> routes_;
  std::unique_ptr<Impl> impl_;
};

// Helpers shared by the route files.
int HttpStatusFor(const Status& status);
void SendJson(HttpResponse& res, int status, const nlohmann::json& body);
void SendError(HttpResponse& res, const Status& status);
// Whether `target` (a path, maybe with a query) is a TEI or OpenAI route, and
// the error body such a route answers (TEI's {"error", "error_type"}, or
// OpenAI's {"error": {...}}) for one the connection refuses before any
// handler runs (413 payload too large, ...).
bool IsTeiPath(std::string_view target);
nlohmann::json TeiErrorJson(std::string_view target, int status, const std::string& message);
// The body parsed as JSON, or InvalidArgument.
StatusOr<nlohmann::json> ParseBody(const HttpRequest& req);

}  // namespace bertrt::server

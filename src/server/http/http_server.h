// The HTTP front end: KServe v2, text-embeddings-inference compatible and
// OpenAI-compatible endpoints, /metrics. Decodes JSON to native requests,
// hands them to each model's scheduler, encodes the answers; every error is a
// JSON body {"error": ...} with its 4xx/5xx status.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "server/common/metrics.h"
#include "server/common/served_model.h"
#include "server/common/tls.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace bertrt::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  size_t max_payload_bytes = 8 << 20;
  // httplib gives each connection a thread for its lifetime, keep-alive
  // waits included, and handlers block on the batcher (HandlerPool): this
  // many are kept ready, more start on demand up to max_handler_threads.
  int handler_threads = 512;
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
};

class HttpServer {
 public:
  HttpServer(ModelRegistry& registry, Metrics& metrics, HttpOptions options);
  ~HttpServer();

  // Binds the port (so a caller can log "listening" only when it is true).
  Status Bind();
  // Serves until Stop(); in-flight requests are finished before it returns.
  void Run();
  void Stop();

  // Used by the route files.
  ModelRegistry& registry() { return registry_; }
  Metrics& metrics() { return metrics_; }
  const HttpOptions& options() const { return options_; }

 private:
  void AddKServeRoutes();
  void AddTeiRoutes();
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  // Register a route behind the API key (when one is set): a request without
  // it gets 401 and counts as a failed `endpoint` request.
  void Get(const std::string& pattern, const std::string& endpoint, Handler handler);
  void Post(const std::string& pattern, const std::string& endpoint, Handler handler);
  Handler RequireKey(const std::string& endpoint, Handler handler);
  bool Authorized(const httplib::Request& req) const;
  // Answers, before httplib reads any body, the requests whose body it would
  // frame wrongly (RFC 9112 section 6); true when it did. A GET with a body
  // left the body on the connection, where it read as the next request, and
  // every later request on that keep-alive connection got 400; two different
  // Content-Length headers were taken as the first (request smuggling behind
  // a proxy); a POST with neither Content-Length nor Transfer-Encoding (an
  // empty body: `curl -X POST .../v2/repository/index`, Triton's documented
  // form) waited for a body until the client gave up.
  bool AnswerBeforeBody(const httplib::Request& req, httplib::Response& res);

  ModelRegistry& registry_;
  Metrics& metrics_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> http_;
  // The POST routes as registered (pattern, handler behind the key), for the
  // bodiless POSTs AnswerBeforeBody dispatches itself.
  std::vector<std::pair<std::regex, Handler>> post_routes_;
  int listen_fd_ = -1;  // the listening socket, to widen httplib's backlog
};

// Helpers shared by the route files.
int HttpStatusFor(const Status& status);
void SendJson(httplib::Response& res, int status, const nlohmann::json& body);
void SendError(httplib::Response& res, const Status& status);
// The body parsed as JSON, or InvalidArgument.
StatusOr<nlohmann::json> ParseBody(const httplib::Request& req);
// Submits `request` to the model and waits; records queue/compute metrics.
StatusOr<InferResult> RunOn(ServedModel& model, Metrics& metrics, InferRequest request);

}  // namespace bertrt::server

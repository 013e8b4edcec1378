#include "server/http/http_server.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string_view>

#include "importer/json_util.h"
#include "server/common/auth.h"
#include "server/common/kserve.h"
#include "server/common/request_log.h"
#include "server/http/client_gone.h"
#include "server/http/handler_pool.h"

namespace bertrt::server {
using nlohmann::json;

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented:
      return 400;
    case StatusCode::kOutOfRange:
      return 413;  // an input longer than the model takes
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // Replace, never throw, on invalid UTF-8 echoed back from an input.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendError(httplib::Response& res, const Status& status) {
  SendJson(res, HttpStatusFor(status), json{{"error", status.message()}});
}

namespace {

// InvalidArgument when `body` nests deeper than any request needs
// (importer::kMaxJsonDepth): every JSON body is checked before it is parsed.
Status CheckJsonNesting(std::string_view body) {
  // Every handler walks what it parses, some recursively (KServe's nested
  // `data`): 60,000 levels in a 120 KB body overflowed the stack.
  if (!importer::JsonNestingWithin(body, importer::kMaxJsonDepth))
    return InvalidArgument("JSON nested deeper than " + std::to_string(importer::kMaxJsonDepth) +
                           " levels; no request needs more");
  return Status::Ok();
}

}  // namespace

StatusOr<json> ParseBody(const httplib::Request& req) {
  if (req.has_header("Inference-Header-Content-Length"))
    return InvalidArgument(
        "binary tensor data (Inference-Header-Content-Length) is taken only by "
        "/v2/models/{model}/infer; send a JSON body here");
  RETURN_IF_ERROR(CheckJsonNesting(req.body));
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return InvalidArgument("malformed JSON body (or invalid UTF-8 in it)");
  return body;
}

StatusOr<InferResult> RunOn(ServedModel& model, Metrics& metrics, InferRequest request) {
  ASSIGN_OR_RETURN(InferResult result, model.scheduler().Infer(std::move(request)));
  metrics.ObserveRequest(model.name(), result.queue_seconds, result.compute_seconds);
  return result;
}

namespace {

// The start of the request this handler thread serves (httplib runs a
// request's pre-routing handler, route and logger on one thread).
std::chrono::steady_clock::time_point& RequestStart() {
  thread_local std::chrono::steady_clock::time_point start;
  return start;
}

// The socket to close once the response of this thread's request is
// written (AnswerBeforeBody), or -1.
int& CloseAfterResponse() {
  thread_local int fd = -1;
  return fd;
}

// Answers `message` with `status` and has the connection closed once the
// answer is written: whatever body follows cannot be told from the next
// request. httplib keeps a connection open whatever the response says; its
// logger, which runs after the write, closes it (LingeringClose).
void AnswerAndClose(const httplib::Request& req, httplib::Response& res, int status,
                    const std::string& message) {
  res.set_header("Connection", "close");
  CloseAfterResponse() = ConnectionSocket(req);
  SendJson(res, status, nlohmann::json{{"error", message}});
}

std::string PayloadTooLarge(size_t limit) {
  return "payload larger than --max-payload-bytes " + std::to_string(limit);
}

// Ends a connection whose answer is written: our side first (the answer,
// then FIN), then what the client still sends is read away until it closes
// too or 2 s pass. Closing with unread bytes, or bytes arriving after,
// resets the connection, which can destroy the answer before the client
// reads it (the lingering close of nginx and Apache). httplib then closes
// the socket, finding it ended.
void LingeringClose(int fd) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  char sink[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    if (::recv(fd, sink, sizeof(sink), 0) <= 0) break;
  }
  ::shutdown(fd, SHUT_RD);
}

// httplib::SSLServer from PEM text (it takes files or parsed objects).
std::unique_ptr<httplib::Server> MakeServer(const TlsPem& tls) {
  if (tls.cert.empty()) return std::make_unique<httplib::Server>();
  BIO* cert_bio = BIO_new_mem_buf(tls.cert.data(), static_cast<int>(tls.cert.size()));
  BIO* key_bio = BIO_new_mem_buf(tls.key.data(), static_cast<int>(tls.key.size()));
  X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(cert_bio);
  BIO_free(key_bio);
  auto server = std::make_unique<httplib::SSLServer>(cert, key);
  X509_free(cert);
  EVP_PKEY_free(key);
  return server;
}

}  // namespace

HttpServer::HttpServer(ModelRegistry& registry, Metrics& metrics, HttpOptions options)
    : registry_(registry),
      metrics_(metrics),
      options_(std::move(options)),
      http_(MakeServer(options_.tls)) {
  const size_t threads = options_.handler_threads, max_threads = options_.max_handler_threads;
  http_->new_task_queue = [threads, max_threads] { return new HandlerPool(threads, max_threads); };
  http_->set_payload_max_length(options_.max_payload_bytes);
  // Headers and body leave as separate writes; with Nagle's algorithm the
  // body would wait for the client's delayed ACK (~40 ms per response).
  http_->set_tcp_nodelay(true);
  // Keep client connections open: httplib's default closes one after 5
  // requests, and each reconnect goes through its short listen backlog.
  http_->set_keep_alive_max_count(100000);
  // Fills a JSON body into the errors httplib makes itself (404 route, 413
  // payload); responses the handlers wrote keep their own body.
  http_->set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 413   ? PayloadTooLarge(options_.max_payload_bytes)
                          : res.status == 404 ? "no such endpoint"
                                              : "request failed";
    SendJson(res, res.status, json{{"error", message}});
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what += std::string(": ") + e.what();
        } catch (...) {
        }
        SendJson(res, 500, json{{"error", what}});
      });
  // Every response carries a request id, so a client can quote it and the
  // access log can be searched for it.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Request-Id", RequestId(req.get_header_value("X-Request-Id")));
    RequestStart() = std::chrono::steady_clock::now();
    return AnswerBeforeBody(req, res) ? httplib::Server::HandlerResponse::Handled
                                      : httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib calls its logger once the response is written: the access log,
  // and the close AnswerBeforeBody asked for.
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (options_.log_requests)
      LogRequest({{"request_id", res.get_header_value("X-Request-Id")},
                  {"protocol", "http"},
                  {"method", req.method},
                  {"path", req.path},
                  {"status", res.status},
                  {"remote", req.remote_addr}},
                 RequestStart());
    if (int& fd = CloseAfterResponse(); fd >= 0) {
      LingeringClose(fd);
      fd = -1;
    }
  });
  AddKServeRoutes();
  AddTeiRoutes();
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
  });
}

HttpServer::~HttpServer() = default;

bool HttpServer::Authorized(const httplib::Request& req) const {
  return BearerKeyMatches(req.get_header_value("Authorization"), options_.api_key);
}

HttpServer::Handler HttpServer::RequireKey(const std::string& endpoint, Handler handler) {
  if (options_.api_key.empty()) return handler;
  return [this, endpoint, handler = std::move(handler)](const httplib::Request& req,
                                                        httplib::Response& res) {
    if (Authorized(req)) return handler(req, res);
    res.set_header("WWW-Authenticate", "Bearer");
    SendJson(res, 401,
             json{{"error",
                   "unauthorized: a Bearer API key is required "
                   "(Authorization: Bearer <key>); missing or wrong"}});
    // No model label: it would come from an unauthenticated client.
    metrics_.CountRequest("", endpoint, false);
  };
}

void HttpServer::Get(const std::string& pattern, const std::string& endpoint, Handler handler) {
  http_->Get(pattern, RequireKey(endpoint, std::move(handler)));
}

void HttpServer::Post(const std::string& pattern, const std::string& endpoint, Handler handler) {
  Handler keyed = RequireKey(endpoint, std::move(handler));
  post_routes_.emplace_back(std::regex(pattern), keyed);
  // The body comes through a content reader, so that its size is checked as
  // it arrives and after decoding: httplib's own reading applies
  // --max-payload-bytes to a declared Content-Length only, and read a chunked
  // body whole (50 MB: RSS 146 MB -> 2.35 GB, kept) and inflated a gzip one
  // without a limit (200 KB -> 200 MB). Reading stops at the limit.
  http_->Post(pattern, [this, keyed](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& read) {
    httplib::Request whole = req;  // its matches still point into req.path
    bool over = false;
    const bool complete = read([&](const char* data, size_t n) {
      over = whole.body.size() + n > options_.max_payload_bytes;
      if (!over) whole.body.append(data, n);
      return !over;
    });
    if (!complete)  // the rest of the body is still on the connection
      return AnswerAndClose(req, res, over ? 413 : 400,
                            over ? PayloadTooLarge(options_.max_payload_bytes) + " (after decoding)"
                                 : "the request body could not be read (bad chunked or gzip "
                                   "encoding?)");
    keyed(whole, res);
  });
}

bool HttpServer::AnswerBeforeBody(const httplib::Request& req, httplib::Response& res) {
  auto refuse = [&](const std::string& why, int status = 400) {
    AnswerAndClose(req, res, status, why);
    return true;
  };
  const size_t lengths = req.get_header_value_count("Content-Length");
  const std::string length = req.get_header_value("Content-Length");
  for (size_t i = 1; i < lengths; ++i)
    if (req.get_header_value("Content-Length", i) != length)
      return refuse("conflicting Content-Length headers; send one");
  if (lengths) {
    const bool digits =
        !length.empty() && length.size() <= 18 &&
        std::all_of(length.begin(), length.end(), [](unsigned char c) { return std::isdigit(c); });
    if (!digits) return refuse("Content-Length \"" + length + "\" is not a byte count");
    // Refused before a byte of it is read, so the body must not stay behind.
    if (std::stoull(length) > options_.max_payload_bytes)
      return refuse(PayloadTooLarge(options_.max_payload_bytes), 413);
  }
  const bool chunked = req.has_header("Transfer-Encoding");
  if (lengths && chunked) return refuse("both Content-Length and Transfer-Encoding; send one");
  const bool post = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  if (!post) {
    if (chunked || (lengths && length != "0"))
      return refuse(req.method + " requests carry no body here; send it with POST");
    return false;
  }
  if (lengths || chunked) return false;  // httplib reads the body
  // Neither header: the body is empty (RFC 9112 section 6.3); route it here.
  for (const auto& [pattern, handler] : post_routes_) {
    httplib::Request bodiless = req;
    if (std::regex_match(bodiless.path, bodiless.matches, pattern)) {
      handler(bodiless, res);
      return true;
    }
  }
  SendJson(res, 404, json{{"error", "no such endpoint"}});
  return true;
}

Status HttpServer::Bind() {
  if (!http_->is_valid())
    return InvalidArgument("TLS: the certificate or key was not accepted by the HTTPS server");
  // Remember the listening socket: httplib listens with a backlog of 5
  // (compiled into Debian's library), which bursts of new connections
  // overflow; listening again on it widens the queue.
  http_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  if (!http_->bind_to_port(options_.host, options_.port))
    return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                       " (in use, or not an address of this machine)");
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
  return Status::Ok();
}

void HttpServer::Run() { http_->listen_after_bind(); }

void HttpServer::Stop() { http_->stop(); }

namespace {

// A KServe infer body: JSON, or with the binary tensor data extension a JSON
// header of Inference-Header-Content-Length bytes followed by tensor bytes.
StatusOr<KServeRequest> DecodeInferBody(const httplib::Request& req) {
  std::string_view header = req.body, binary;
  if (req.has_header("Inference-Header-Content-Length")) {
    const std::string value = req.get_header_value("Inference-Header-Content-Length");
    size_t length = 0;
    const bool digits =
        !value.empty() && value.size() <= 18 &&
        std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); });
    if (digits) length = std::stoull(value);
    if (!digits || length > header.size())
      return InvalidArgument("Inference-Header-Content-Length \"" + value +
                             "\" must be the byte length of the JSON header, at most the body's " +
                             std::to_string(header.size()) + " bytes");
    binary = header.substr(length);
    header = header.substr(0, length);
  }
  RETURN_IF_ERROR(CheckJsonNesting(header));
  json body = json::parse(header.begin(), header.end(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    return InvalidArgument(binary.empty() && !req.has_header("Inference-Header-Content-Length")
                               ? "malformed JSON body (or invalid UTF-8 in it)"
                               : "malformed JSON header (check Inference-Header-Content-Length)");
  return DecodeKServeRequest(body, binary);
}

// The KServe infer handler, once the model is known.
void Infer(ServedModel& model, Metrics& metrics, const httplib::Request& req,
           httplib::Response& res) {
  auto request = DecodeInferBody(req);
  if (!request.ok()) return SendError(res, request.status());
  auto outputs = [&] {
    const ClientWatch watch(req);  // until the result is back, before the connection is used
    return InferKServe(model, metrics, *request, watch.gone());
  }();
  if (!outputs.ok()) return SendError(res, outputs.status());
  HttpAnswer answer = EncodeKServeResponse(*request, model, *outputs);
  res.status = 200;
  if (answer.header_length == 0) {
    res.set_content(std::move(answer.body), "application/json");
    return;
  }
  res.set_header("Inference-Header-Content-Length", std::to_string(answer.header_length));
  res.set_content(std::move(answer.body), "application/octet-stream");
}

}  // namespace

void HttpServer::AddKServeRoutes() {
  using httplib::Request, httplib::Response;
  Get("/v2", "kserve_server", [](const Request&, Response& res) {
    SendJson(res, 200,
             json{{"name", "bertrt"},
                  {"version", BERTRT_VERSION},
                  {"extensions", json::array({"model_repository", "model_repository_metadata",
                                              "binary_tensor_data"})}});
  });
  http_->Get("/v2/health/live",
             [](const Request&, Response& res) { SendJson(res, 200, json::object()); });
  // KServe v2: 200 when ready, a 4xx when not (400, as Triton).
  http_->Get("/v2/health/ready", [this](const Request&, Response& res) {
    const Status ready = registry_.Readiness();
    SendJson(res, ready.ok() ? 200 : 400,
             ready.ok() ? json::object() : json{{"error", ready.message()}});
  });
  // /v2/models/{m}[/versions/{v}][/ready]
  const std::string model_path = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  Get(model_path, "kserve_metadata", [this](const Request& req, Response& res) {
    auto model = registry_.Find(req.matches[1], req.matches[2]);
    if (!model.ok()) return SendError(res, model.status());
    SendJson(res, 200, ModelMetadata(**model));
  });
  Get(model_path + "/ready", "kserve_ready", [this](const Request& req, Response& res) {
    auto model = registry_.Find(req.matches[1], req.matches[2]);
    if (!model.ok()) return SendError(res, model.status());
    SendJson(res, 200, json{{"name", (*model)->name()}, {"ready", true}});
  });
  // The model repository extension: what the repository holds, and (with
  // --model-control-mode explicit) loading and unloading by name.
  Post("/v2/repository/index", "repository_index", [this](const Request&, Response& res) {
    json index = json::array();
    for (const RepositoryEntry& e : registry_.Index()) {
      json entry = {{"name", e.name}, {"state", e.state}, {"reason", e.reason}};
      if (!e.version.empty()) entry["version"] = e.version;
      index.push_back(std::move(entry));
    }
    SendJson(res, 200, index);
  });
  Post(R"(/v2/repository/models/([^/]+)/(load|unload))", "repository_control",
       [this](const Request& req, Response& res) {
         const std::string name = req.matches[1];
         Status st = req.matches[2] == "load" ? registry_.Load(name) : registry_.Unload(name);
         if (!st.ok()) return SendError(res, st);
         SendJson(res, 200, json::object());
       });
  Post(model_path + "/infer", "kserve_infer", [this](const Request& req, Response& res) {
    InFlightGuard in_flight(metrics_);
    auto model = registry_.Find(req.matches[1], req.matches[2]);
    if (!model.ok()) {
      SendError(res, model.status());
    } else {
      Infer(**model, metrics_, req, res);
    }
    metrics_.CountRequest(model.ok() ? (*model)->name() : "", "kserve_infer", res.status < 400);
  });
}

}  // namespace bertrt::server

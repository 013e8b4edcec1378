#include "server/http/http_server.h"

#include <httplib.h>

#include <cctype>
#include <string_view>

#include "server/common/kserve.h"

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

StatusOr<json> ParseBody(const httplib::Request& req) {
  if (req.has_header("Inference-Header-Content-Length"))
    return InvalidArgument(
        "the binary tensor extension is not supported; send JSON data (binary_data=False)");
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return InvalidArgument("malformed JSON body (or invalid UTF-8 in it)");
  return body;
}

StatusOr<InferResult> RunOn(ServedModel& model, Metrics& metrics, InferRequest request) {
  ASSIGN_OR_RETURN(InferResult result, model.scheduler().Infer(std::move(request)));
  metrics.ObserveRequest(model.name(), result.queue_seconds, result.compute_seconds);
  return result;
}

HttpServer::HttpServer(ModelRegistry& registry, Metrics& metrics, HttpOptions options)
    : registry_(registry),
      metrics_(metrics),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()) {
  const int threads = options_.handler_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_payload_bytes);
  // Fills a JSON body into the errors httplib makes itself (404 route, 413
  // payload); responses the handlers wrote keep their own body.
  http_->set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 413 ? "payload larger than --max-payload-bytes " +
                                                  std::to_string(options_.max_payload_bytes)
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
  AddKServeRoutes();
  AddTeiRoutes();
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
  });
}

HttpServer::~HttpServer() = default;

// The Bearer token of `req` equals the key; the time taken depends only on the
// key's length, not on how much of it a guess got right.
bool HttpServer::Authorized(const httplib::Request& req) const {
  const std::string& key = options_.api_key;
  if (key.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  std::string_view given(header);
  given.remove_prefix(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  unsigned diff = given.size() != key.size();
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i]) ^
            static_cast<unsigned char>(i < given.size() ? given[i] : 0);
  return diff == 0;
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
  http_->Post(pattern, RequireKey(endpoint, std::move(handler)));
}

Status HttpServer::Bind() {
  if (!http_->bind_to_port(options_.host, options_.port))
    return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                       " (in use, or not an address of this machine)");
  return Status::Ok();
}

void HttpServer::Run() { http_->listen_after_bind(); }

void HttpServer::Stop() { http_->stop(); }

namespace {

// The KServe infer handler, once the model is known.
void Infer(ServedModel& model, Metrics& metrics, const httplib::Request& req,
           httplib::Response& res) {
  auto body = ParseBody(req);
  if (!body.ok()) return SendError(res, body.status());
  auto request = DecodeKServeRequest(*body);
  if (!request.ok()) return SendError(res, request.status());
  if (Status st = CheckRequestedOutputs(*request, model); !st.ok()) return SendError(res, st);
  InferRequest native;
  for (const TextInput& t : request->texts) {
    auto seq = model.Encode(t, request->truncate);
    if (!seq.ok()) return SendError(res, seq.status());
    native.sequences.push_back(std::move(*seq));
  }
  for (SequenceInput& s : request->sequences) native.sequences.push_back(std::move(s));
  request->sequences.clear();
  for (const std::string& o : request->outputs)
    native.last_hidden_state |= o == "last_hidden_state";
  auto result = RunOn(model, metrics, std::move(native));
  if (!result.ok()) return SendError(res, result.status());
  SendJson(res, 200, EncodeKServeResponse(*request, model, *result));
}

}  // namespace

void HttpServer::AddKServeRoutes() {
  using httplib::Request, httplib::Response;
  Get("/v2", "kserve_server", [](const Request&, Response& res) {
    SendJson(res, 200,
             json{{"name", "bertrt"},
                  {"version", BERTRT_VERSION},
                  {"extensions", json::array({"model_repository", "model_repository_metadata"})}});
  });
  http_->Get("/v2/health/live",
             [](const Request&, Response& res) { SendJson(res, 200, json::object()); });
  http_->Get("/v2/health/ready",
             [](const Request&, Response& res) { SendJson(res, 200, json::object()); });
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

#include "server/http/http_server.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <string_view>

#include "core/json_util.h"
#include "server/common/auth.h"
#include "server/common/kserve.h"
#include "server/common/request_log.h"
#include "server/common/triton_config.h"

namespace bertrt::server {
using serving::RepositoryEntry;
using serving::RequestTimer;
using serving::ServedModel;
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

void SendJson(HttpResponse& res, int status, const json& body) {
  res.status = status;
  // Replace, never throw, on invalid UTF-8 echoed back from an input.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendError(HttpResponse& res, const Status& status) {
  SendJson(res, HttpStatusFor(status), json{{"error", status.message()}});
}

namespace {

// InvalidArgument when `body` nests deeper than any request needs
// (kMaxJsonDepth): every JSON body is checked before it is parsed.
Status CheckJsonNesting(std::string_view body) {
  // Every handler walks what it parses, some recursively (KServe's nested
  // `data`): 60,000 levels in a 120 KB body overflowed the stack.
  if (!JsonNestingWithin(body, kMaxJsonDepth))
    return InvalidArgument("JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                           " levels; no request needs more");
  return Status::Ok();
}

}  // namespace

StatusOr<json> ParseBody(const HttpRequest& req) {
  if (req.has_header("Inference-Header-Content-Length"))
    return InvalidArgument(
        "binary tensor data (Inference-Header-Content-Length) is taken only by "
        "/v2/models/{model}/infer; send a JSON body here");
  RETURN_IF_ERROR(CheckJsonNesting(req.body));
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return InvalidArgument("malformed JSON body (or invalid UTF-8 in it)");
  return body;
}

void HttpServer::AddRoutes() {
  AddKServeRoutes();
  AddTeiRoutes();
  // Behind the API key when one is set (Prometheus sends it with its scrape
  // config's `authorization`): the series name every model and its traffic.
  Get("/metrics", "metrics", [this](const HttpRequest&, HttpResponse& res) {
    std::string text = metrics_.Render();
    // The engines' activation memory, per served model and instance: with
    // the heap gauges, what tells a memory that follows the largest batch from
    // a leak.
    text += "# HELP bertrt_engine_activation_bytes Activation memory an engine holds (its "
            "largest batch so far).\n# TYPE bertrt_engine_activation_bytes gauge\n";
    for (const auto& m : registry_.Served())
      for (const auto& [device, bytes] : m->scheduler().EngineMemory())
        text += "bertrt_engine_activation_bytes{model=\"" + MetricLabel(m->name()) +
                "\",version=\"" + MetricLabel(m->version()) + "\",instance=\"" +
                MetricLabel(device) + "\"} " + std::to_string(bytes) + "\n";
    // Triton's gauge of the requests waiting for a batch, per loaded version.
    text += "# HELP nv_inference_pending_request_count Instantaneous number of pending requests "
            "awaiting execution per-model.\n# TYPE nv_inference_pending_request_count gauge\n";
    for (const auto& m : registry_.Served())
      text += "nv_inference_pending_request_count{model=\"" + MetricLabel(m->name()) +
              "\",version=\"" + MetricLabel(m->version()) + "\"} " +
              std::to_string(m->scheduler().queued()) + "\n";
    // The same under text-embeddings-inference's name, so autoscaling rules
    // written for either server work unchanged (the Helm chart scales on it).
    text += "# HELP te_queue_size Requests waiting for a batch, per model.\n"
            "# TYPE te_queue_size gauge\n";
    for (const auto& m : registry_.Served())
      text += "te_queue_size{model=\"" + MetricLabel(m->name()) + "\",version=\"" +
              MetricLabel(m->version()) + "\"} " + std::to_string(m->scheduler().queued()) + "\n";
    res.set_content(text, "text/plain; version=0.0.4");
  });
}

void HttpServer::Get(const std::string& pattern, const std::string& endpoint, Handler handler) {
  routes_.Add("GET", pattern, {std::move(handler), endpoint, false});
}

void HttpServer::GetOpen(const std::string& pattern, Handler handler) {
  routes_.Add("GET", pattern, {std::move(handler), "", true});
}

void HttpServer::Post(const std::string& pattern, const std::string& endpoint, Handler handler) {
  routes_.Add("POST", pattern, {std::move(handler), endpoint, false});
}

namespace {

// `message` in the error shape the path's clients read (TEI's or OpenAI's,
// else KServe's).
void SendRouteError(HttpResponse& res, std::string_view path, int status,
                    const std::string& message) {
  SendJson(res, status,
           IsTeiPath(path) ? TeiErrorJson(path, status, message) : json{{"error", message}});
}

}  // namespace

const HttpServer::Route* HttpServer::Admit(HttpRequest& req, HttpResponse& refusal) const {
  auto match = routes_.Find(req.method, req.path);
  if (!match.target) {
    if (match.allow.empty()) {
      SendRouteError(refusal, req.path, 404, "no such endpoint: " + req.method + " " + req.path);
    } else {
      refusal.set_header("Allow", match.allow);
      SendRouteError(refusal, req.path, 405,
                     req.method + " is not allowed on " + req.path + "; allowed: " + match.allow);
    }
    return nullptr;
  }
  const Route& route = *match.target;
  if (!route.open && !options_.api_key.empty() &&
      !BearerKeyMatches(req.get_header_value("Authorization"), options_.api_key)) {
    refusal.set_header("WWW-Authenticate", "Bearer");
    SendRouteError(refusal, req.path, 401,
                   "unauthorized: a Bearer API key is required (Authorization: Bearer <key>); "
                   "missing or wrong");
    // No model label: it would come from an unauthenticated client.
    metrics_.CountRequest("", route.endpoint, 401);
    return nullptr;
  }
  req.params = std::move(match.params);
  return &route;
}

void HttpServer::Dispatch(const Route& route, const HttpRequest& req, HttpResponse& res) const {
  try {
    route.handler(req, res);
  } catch (const std::exception& e) {
    SendJson(res, 500, json{{"error", std::string("internal error: ") + e.what()}});
  }
}

namespace {

// A KServe infer body: JSON, or with the binary tensor data extension a JSON
// header of Inference-Header-Content-Length bytes followed by tensor bytes.
StatusOr<KServeRequest> DecodeInferBody(const HttpRequest& req, const ServedModel& model) {
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
  return DecodeKServeRequest(body, model.scheduler().options(), binary);
}

// A load request's body: {"parameters": {...}} (LoadConfigParameter), or none.
StatusOr<std::string> LoadRequestConfig(const HttpRequest& req) {
  if (req.body.empty()) return std::string();
  ASSIGN_OR_RETURN(json body, ParseBody(req));
  auto params = body.is_object() ? body.find("parameters") : body.end();
  if (params == body.end()) return std::string();
  if (!params->is_object()) return InvalidArgument("\"parameters\" must be an object");
  std::vector<std::pair<std::string, std::optional<std::string>>> named;
  for (const auto& [key, value] : params->items())
    named.emplace_back(key, value.is_string() ? std::optional(value.get<std::string>())
                                              : std::nullopt);
  return LoadConfigParameter(named);
}

// The KServe infer handler, once the model is known; the request came at `arrival`.
void Infer(ServedModel& model, Metrics& metrics, const HttpRequest& req, HttpResponse& res,
           RequestTimer::Clock::time_point arrival) {
  auto request = DecodeInferBody(req, model);
  if (!request.ok()) return SendError(res, request.status());
  RequestTimer timer(model, &metrics, arrival);
  serving::Infer infer(model, timer, req.client_gone);
  auto outputs = InferKServe(infer, *request);
  if (!outputs.ok()) {
    SendError(res, outputs.status());
    return timer.Finish(outputs.status());
  }
  HttpAnswer answer = EncodeKServeResponse(*request, model, *outputs);
  res.status = 200;
  if (answer.header_length == 0) {
    res.set_content(std::move(answer.body), "application/json");
  } else {
    res.set_header("Inference-Header-Content-Length", std::to_string(answer.header_length));
    res.set_content(std::move(answer.body), "application/octet-stream");
  }
  timer.Finish(Status::Ok());
}

}  // namespace

void HttpServer::AddKServeRoutes() {
  using Request = HttpRequest;
  using Response = HttpResponse;
  Get("/v2", "kserve_server", [](const Request&, Response& res) {
    SendJson(res, 200,
             json{{"name", "bertrt"},
                  {"version", BERTRT_VERSION},
                  {"extensions",
                   json::array({"model_repository", "model_repository_metadata",
                                "binary_tensor_data", "model_configuration", "statistics"})}});
  });
  // KServe's bodies ({"live": true}, {"ready": ...}: what its Python SDK
  // reads), with Triton's status: 200 when ready, 400 when not. Open routes
  // tell nothing but that: the reason a server is not ready (a path, a load
  // error) is in the log and, behind the key, in /v2/repository/index.
  GetOpen("/v2/health/live", [](const Request&, Response& res) {
    SendJson(res, 200, json{{"live", true}});
  });
  GetOpen("/v2/health/ready", [this](const Request&, Response& res) {
    const bool ready = registry_.Readiness().ok();
    SendJson(res, ready ? 200 : 400, json{{"ready", ready}});
  });
  // Triton's statistics extension: every served version of every model
  // (before the metadata route, which would take "stats" for a model name).
  Get("/v2/models/stats", "kserve_stats", [this](const Request&, Response& res) {
    json stats = json::array();
    for (const auto& m : registry_.Served())
      stats.push_back(StatisticsJson(m->name(), m->version(), m->statistics().Snapshot()));
    SendJson(res, 200, json{{"model_stats", std::move(stats)}});
  });
  // Each route under /v2/models/{model} and /v2/models/{model}/versions/{version}
  // (no version: the latest served, or for /stats every served version).
  auto model_routes = [](const std::string& suffix) {
    return std::array<std::string, 2>{"/v2/models/{model}" + suffix,
                                      "/v2/models/{model}/versions/{version}" + suffix};
  };
  // The model configuration extension: the model's settings in effect, as
  // Triton's ModelConfig.
  for (const std::string& path : model_routes("/config"))
    Get(path, "kserve_config", [this](const Request& req, Response& res) {
      auto model = registry_.Find(req.params["model"], req.params["version"]);
      if (!model.ok()) return SendError(res, model.status());
      auto config = ModelConfigJson(**model);
      if (!config.ok()) return SendError(res, config.status());
      SendJson(res, 200, *config);
    });
  for (const std::string& path : model_routes("/stats"))
    Get(path, "kserve_stats", [this](const Request& req, Response& res) {
      const std::string &name = req.params["model"], &version = req.params["version"];
      auto found = registry_.Find(name, version);
      if (!found.ok()) return SendError(res, found.status());
      json stats = json::array();
      for (const auto& m : registry_.Served())
        if (m->name() == name && (version.empty() || m->version() == version))
          stats.push_back(StatisticsJson(m->name(), m->version(), m->statistics().Snapshot()));
      SendJson(res, 200, json{{"model_stats", std::move(stats)}});
    });
  for (const std::string& path : model_routes(""))
    Get(path, "kserve_metadata", [this](const Request& req, Response& res) {
      auto model = registry_.Find(req.params["model"], req.params["version"]);
      if (!model.ok()) return SendError(res, model.status());
      SendJson(res, 200, ModelMetadata(**model));
    });
  for (const std::string& path : model_routes("/ready"))
    Get(path, "kserve_ready", [this](const Request& req, Response& res) {
      auto model = registry_.Find(req.params["model"], req.params["version"]);
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
  for (const bool load : {true, false})
    Post(std::string("/v2/repository/models/{model}/") + (load ? "load" : "unload"),
         "repository_control", [this, load](const Request& req, Response& res) {
           const std::string& name = req.params["model"];
           auto config = load ? LoadRequestConfig(req) : StatusOr<std::string>("");
           if (!config.ok()) return SendError(res, config.status());
           Status st = load ? registry_.Load(name, *config) : registry_.Unload(name);
           if (!st.ok()) return SendError(res, st);
           SendJson(res, 200, json::object());
         });
  for (const std::string& path : model_routes("/infer"))
    Post(path, "kserve_infer", [this](const Request& req, Response& res) {
      InFlightGuard in_flight(metrics_);
      const auto arrival = RequestTimer::Clock::now();
      auto model = registry_.Find(req.params["model"], req.params["version"]);
      if (!model.ok()) {
        SendError(res, model.status());
      } else {
        Infer(**model, metrics_, req, res, arrival);
      }
      metrics_.CountRequest(model.ok() ? (*model)->name() : "", "kserve_infer", res.status);
    });
}

}  // namespace bertrt::server

#include "bench_targets.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>

#include "grpc_service.grpc.pb.h"
#include "server/http/http_server.h"

namespace bertrt::cli {
namespace {

using nlohmann::json;

std::string BaseUrl(const loadgen::Url& url) {
  return url.scheme + "://" + url.host + ":" + std::to_string(url.port);
}

// A server error body {"error": "..."}, else the body itself, cut short.
std::string ErrorText(const httplib::Result& res) {
  if (!res) return httplib::to_string(res.error());
  json body = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object() && body.contains("error") && body["error"].is_string())
    return body["error"].get<std::string>();
  return res->body.substr(0, 200);
}

std::unique_ptr<httplib::Client> MakeHttpClient(const loadgen::Url& url, double timeout_s) {
  auto client = std::make_unique<httplib::Client>(BaseUrl(url));
  const auto sec = static_cast<time_t>(timeout_s);
  const auto usec = static_cast<time_t>((timeout_s - sec) * 1e6);
  client->set_connection_timeout(5);
  client->set_read_timeout(sec, usec);
  client->set_write_timeout(sec, usec);
  client->set_keep_alive(true);  // one connection per worker, as a real client keeps
  // Headers and body go out in separate writes; with Nagle on, the body waits
  // for the server's delayed ACK (40 ms on Linux). Clients such as urllib3 and
  // Triton's turn it off too.
  client->set_tcp_nodelay(true);
  return client;
}

class HttpClient : public loadgen::Client {
 public:
  HttpClient(const ServerTargetOptions& options, std::string path)
      : options_(options),
        path_(std::move(path)),
        http_(MakeHttpClient(options.url, options.timeout_s)) {}

  loadgen::Outcome Send(const std::vector<std::string>& texts) override {
    json body;
    if (options_.endpoint == HttpEndpoint::kKServe)
      body = {{"inputs",
               {{{"name", "text"},
                 {"datatype", "BYTES"},
                 {"shape", {static_cast<int>(texts.size())}},
                 {"data", texts}}}}};
    else
      body = {{"inputs", texts}};
    httplib::Result res = http_->Post(path_, body.dump(), "application/json");
    loadgen::Outcome out;
    out.status = res ? res->status : 0;
    if (out.status != 200) out.error = ErrorText(res);
    return out;
  }

 private:
  const ServerTargetOptions& options_;
  std::string path_;
  std::unique_ptr<httplib::Client> http_;
};

class HttpTarget : public loadgen::Target {
 public:
  explicit HttpTarget(ServerTargetOptions options)
      : options_(std::move(options)), metrics_(MakeHttpClient(options_.url, options_.timeout_s)) {}

  std::string Describe() const override {
    return BaseUrl(options_.url) + Path() + " (model " + options_.model + ")";
  }

  StatusOr<std::unique_ptr<loadgen::Client>> NewClient() override {
    return std::unique_ptr<loadgen::Client>(std::make_unique<HttpClient>(options_, Path()));
  }

  // The server's settings (device, precision, batch limits) as /info says.
  json Details() const override { return info_; }

  // Scraped on a connection of its own, so it never waits behind the load.
  StatusOr<loadgen::ServerTotals> Totals() override {
    std::lock_guard lock(mu_);
    httplib::Result res = metrics_->Get("/metrics");
    if (!res || res->status != 200)
      return Unavailable("GET " + BaseUrl(options_.url) + "/metrics: " + ErrorText(res));
    return loadgen::ParseServerTotals(res->body, options_.model);
  }

  // Learns the default model's name from /info when none was given: /metrics
  // labels its histograms by it.
  Status Connect() {
    httplib::Result res = metrics_->Get("/info");
    if (!res)
      return Unavailable("cannot reach " + BaseUrl(options_.url) + ": " + ErrorText(res) +
                         " (is `bertrt serve` listening there?)");
    if (res->status != 200)
      return Unavailable("GET " + BaseUrl(options_.url) + "/info: HTTP " +
                         std::to_string(res->status) + ": " + ErrorText(res));
    json info = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (info.is_object()) info_ = info;
    if (options_.model.empty()) {
      if (!info.is_object() || !info.contains("model_id") || !info["model_id"].is_string())
        return Unavailable("GET /info: no model_id; pass --model NAME");
      options_.model = info["model_id"].get<std::string>();
    }
    return Status::Ok();
  }

 private:
  std::string Path() const {
    return options_.endpoint == HttpEndpoint::kKServe ? "/v2/models/" + options_.model + "/infer"
                                                      : "/embed";
  }

  ServerTargetOptions options_;
  json info_;
  std::mutex mu_;
  std::unique_ptr<httplib::Client> metrics_;
};

// The serving stack without the network: tokenize each text as the server
// does, submit one request per call to the model's scheduler, and keep the
// queue/compute totals the server would put in /metrics.
class InProcessTarget : public loadgen::Target {
 public:
  explicit InProcessTarget(std::shared_ptr<serving::ServedModel> model) : model_(std::move(model)) {}

  std::string Describe() const override {
    return "in-process " + model_->name() + " on " + model_->placement();
  }

  StatusOr<std::unique_ptr<loadgen::Client>> NewClient() override {
    return std::unique_ptr<loadgen::Client>(std::make_unique<Client>(*this));
  }

  StatusOr<loadgen::ServerTotals> Totals() override {
    std::lock_guard lock(mu_);
    return totals_;
  }

 private:
  class Client : public loadgen::Client {
   public:
    explicit Client(InProcessTarget& target) : target_(target) {}
    loadgen::Outcome Send(const std::vector<std::string>& texts) override {
      serving::ServedModel& model = *target_.model_;
      InferRequest request;
      for (const std::string& text : texts) {
        auto seq = model.Encode({text, std::nullopt}, /*truncate=*/false);
        if (!seq.ok()) return Failed(seq.status());
        request.sequences.push_back(std::move(*seq));
      }
      auto result = model.scheduler().Infer(std::move(request));
      if (!result.ok()) return Failed(result.status());
      std::lock_guard lock(target_.mu_);
      target_.totals_.queue_seconds += result->queue_seconds;
      target_.totals_.compute_seconds += result->compute_seconds;
      target_.totals_.requests += 1;
      return {};
    }

   private:
    // The status the HTTP server would answer with, so errors count alike.
    static loadgen::Outcome Failed(const Status& status) {
      return {server::HttpStatusFor(status), status.message()};
    }
    InProcessTarget& target_;
  };

  std::shared_ptr<serving::ServedModel> model_;
  std::mutex mu_;
  loadgen::ServerTotals totals_;
};

// The HTTP status a gRPC status stands for, so both transports count errors
// alike (0: no answer at all).
int HttpStatusForGrpc(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::OUT_OF_RANGE:
      return 413;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    case grpc::StatusCode::UNAVAILABLE:
      return 0;  // no connection
    default:
      return 500;
  }
}

// KServe v2 over gRPC: one channel per worker (its own HTTP/2 connection, as
// a worker of the HTTP target has its own keep-alive connection).
class GrpcTarget : public loadgen::Target {
 public:
  explicit GrpcTarget(ServerTargetOptions options) : options_(std::move(options)) {
    if (!options_.metrics_url.empty())
      if (auto url = loadgen::ParseUrl(options_.metrics_url); url.ok())
        metrics_ = MakeHttpClient(*url, options_.timeout_s);
  }

  std::string Describe() const override {
    return Address() + " ModelInfer (model " + options_.model + ")";
  }

  StatusOr<std::unique_ptr<loadgen::Client>> NewClient() override {
    return std::unique_ptr<loadgen::Client>(std::make_unique<Client>(*this));
  }

  StatusOr<loadgen::ServerTotals> Totals() override {
    if (!metrics_) return Unimplemented("no --metrics-url for this grpc:// target");
    std::lock_guard lock(mu_);
    httplib::Result res = metrics_->Get("/metrics");
    if (!res || res->status != 200)
      return Unavailable("GET " + options_.metrics_url + "/metrics: " + ErrorText(res));
    return loadgen::ParseServerTotals(res->body, options_.model);
  }

  // Learns the model from the repository index when none was given.
  Status Connect() {
    auto stub = NewStub();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    inference::RepositoryIndexRequest req;
    req.set_ready(true);
    inference::RepositoryIndexResponse resp;
    const grpc::Status st = stub->RepositoryIndex(&ctx, req, &resp);
    if (!st.ok())
      return Unavailable("cannot reach " + Address() + ": " + st.error_message() +
                         " (is `bertrt serve` listening there with --grpc-port?)");
    if (options_.model.empty()) {
      if (resp.models().empty()) return Unavailable(Address() + " serves no model");
      options_.model = resp.models(0).name();
    }
    return Status::Ok();
  }

 private:
  class Client : public loadgen::Client {
   public:
    explicit Client(GrpcTarget& target) : target_(target), stub_(target.NewStub()) {}
    loadgen::Outcome Send(const std::vector<std::string>& texts) override {
      inference::ModelInferRequest req;
      req.set_model_name(target_.options_.model);
      auto* input = req.add_inputs();
      input->set_name("text");
      input->set_datatype("BYTES");
      input->add_shape(static_cast<int64_t>(texts.size()));
      std::string raw;
      for (const std::string& t : texts) {
        const uint32_t n = static_cast<uint32_t>(t.size());
        for (int b = 0; b < 4; ++b) raw.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
        raw += t;
      }
      req.add_raw_input_contents(std::move(raw));
      grpc::ClientContext ctx;
      ctx.set_deadline(
          std::chrono::system_clock::now() +
          std::chrono::microseconds(static_cast<int64_t>(target_.options_.timeout_s * 1e6)));
      inference::ModelInferResponse resp;
      const grpc::Status st = stub_->ModelInfer(&ctx, req, &resp);
      loadgen::Outcome out;
      out.status = HttpStatusForGrpc(st);
      if (!st.ok()) out.error = st.error_message();
      return out;
    }

   private:
    GrpcTarget& target_;
    std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  };

  std::string Address() const {
    return "grpc://" + options_.url.host + ":" + std::to_string(options_.url.port);
  }
  std::unique_ptr<inference::GRPCInferenceService::Stub> NewStub() const {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    // A channel per worker: gRPC would otherwise share one connection
    // among channels with equal arguments.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel =
        grpc::CreateCustomChannel(options_.url.host + ":" + std::to_string(options_.url.port),
                                  grpc::InsecureChannelCredentials(), args);
    return inference::GRPCInferenceService::NewStub(channel);
  }

  ServerTargetOptions options_;
  std::mutex mu_;
  std::unique_ptr<httplib::Client> metrics_;
};

// A target checked with one request before any load.
Status Probe(loadgen::Target& target, const std::string& probe_text) {
  ASSIGN_OR_RETURN(auto client, target.NewClient());
  loadgen::Outcome probe = client->Send({probe_text});
  if (probe.status == 0)
    return Unavailable("probe request to " + target.Describe() + ": " + probe.error);
  if (probe.status != 200)
    return Unavailable("probe request to " + target.Describe() + ": status " +
                       std::to_string(probe.status) + ": " + probe.error);
  if (auto totals = target.Totals(); !totals.ok())
    std::fprintf(stderr, "notice: no queue/compute split (%s)\n",
                 totals.status().message().c_str());
  return Status::Ok();
}

// The HTTP target, checked with one request before any load.
StatusOr<std::unique_ptr<loadgen::Target>> ConnectHttp(ServerTargetOptions options,
                                                       const std::string& probe_text) {
  auto target = std::make_unique<HttpTarget>(std::move(options));
  RETURN_IF_ERROR(target->Connect());
  RETURN_IF_ERROR(Probe(*target, probe_text));
  return std::unique_ptr<loadgen::Target>(std::move(target));
}

StatusOr<std::unique_ptr<loadgen::Target>> ConnectGrpc(ServerTargetOptions options,
                                                       const std::string& probe_text) {
  auto target = std::make_unique<GrpcTarget>(std::move(options));
  RETURN_IF_ERROR(target->Connect());
  RETURN_IF_ERROR(Probe(*target, probe_text));
  return std::unique_ptr<loadgen::Target>(std::move(target));
}

}  // namespace

StatusOr<std::unique_ptr<loadgen::Target>> ConnectServerTarget(ServerTargetOptions options,
                                                               const std::string& probe_text) {
  const std::string scheme = options.url.scheme;
  if (scheme == "http" || scheme == "https") return ConnectHttp(std::move(options), probe_text);
  if (scheme == "grpc") {
    if (options.endpoint != HttpEndpoint::kKServe)
      return InvalidArgument("--endpoint embed is HTTP only; grpc:// speaks KServe v2");
    return ConnectGrpc(std::move(options), probe_text);
  }
  return InvalidArgument("--url scheme " + scheme + ": expected http, https or grpc");
}

StatusOr<std::unique_ptr<loadgen::Target>> LoadInProcessTarget(
    const std::string& name, const std::string& path, const serving::ServeDefaults& defaults,
    const ImportOptions& import) {
  ASSIGN_OR_RETURN(serving::ModelServing serving,
                   serving::ResolveServing(defaults, serving::ModelConfigFile{}));
  auto loaded = serving::ServedModel::Load(name, "1", path, serving, defaults, import);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<serving::ServedModel> model = std::move(*loaded);
  return std::unique_ptr<loadgen::Target>(std::make_unique<InProcessTarget>(std::move(model)));
}

}  // namespace bertrt::cli

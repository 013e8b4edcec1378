#include "server/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string_view>

#include "grpc_service.grpc.pb.h"
#include "server/common/auth.h"
#include "server/common/kserve.h"
#include "server/common/request_log.h"
#include "server/common/triton_config.h"

namespace bertrt::server {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

grpc::Status ToGrpc(const Status& st) {
  if (st.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (st.code()) {
    case StatusCode::kOk:
      break;
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kOutOfRange:  // an input longer than the model takes (HTTP: 413)
      code = grpc::StatusCode::OUT_OF_RANGE;
      break;
    case StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kDataLoss:
      code = grpc::StatusCode::DATA_LOSS;
      break;
    case StatusCode::kInternal:
      break;
  }
  return grpc::Status(code, st.message());
}

std::string Where(const std::string& input) { return "input \"" + input + "\": "; }

// Typed `contents` of one input: the repeated field that matches its datatype.
Status DecodeContents(const inference::InferTensorContents& c, InputTensor& t) {
  ASSIGN_OR_RETURN(const int64_t count, ElementCount(t.shape, t.name));
  int64_t got = 0;
  if (t.datatype == "BYTES") {
    t.strings.assign(c.bytes_contents().begin(), c.bytes_contents().end());
    got = c.bytes_contents_size();
  } else if (t.datatype == "INT32") {
    t.ints.assign(c.int_contents().begin(), c.int_contents().end());
    got = c.int_contents_size();
  } else if (t.datatype == "INT64") {
    t.ints.assign(c.int64_contents().begin(), c.int64_contents().end());
    got = c.int64_contents_size();
  } else {
    return Status::Ok();  // not an input datatype bertrt takes; the assembly says so
  }
  if (got != count)
    return InvalidArgument(Where(t.name) + "shape holds " + std::to_string(count) +
                           " elements but contents has " + std::to_string(got) + " " + t.datatype +
                           " elements (BYTES: bytes_contents, INT32: int_contents, "
                           "INT64: int64_contents)");
  return Status::Ok();
}

bool HasContents(const inference::InferTensorContents& c) {
  return c.bool_contents_size() || c.int_contents_size() || c.int64_contents_size() ||
         c.uint_contents_size() || c.uint64_contents_size() || c.fp32_contents_size() ||
         c.fp64_contents_size() || c.bytes_contents_size();
}

StatusOr<KServeRequest> DecodeRequest(const ModelInferRequest& req) {
  const bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != req.inputs_size())
    return InvalidArgument("raw_input_contents has " +
                           std::to_string(req.raw_input_contents_size()) +
                           " entries but the request has " + std::to_string(req.inputs_size()) +
                           " inputs; give one entry per input, in input order");
  std::vector<InputTensor> inputs;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const ModelInferRequest::InferInputTensor& in = req.inputs(i);
    InputTensor t{in.name(), in.datatype(), {in.shape().begin(), in.shape().end()}, {}, {}};
    if (raw) {
      if (HasContents(in.contents()))
        return InvalidArgument(Where(t.name) +
                               "data in both contents and raw_input_contents; use one");
      RETURN_IF_ERROR(DecodeRawTensor(req.raw_input_contents(i), t));
    } else {
      RETURN_IF_ERROR(DecodeContents(in.contents(), t));
    }
    inputs.push_back(std::move(t));
  }
  KServeRequest r;
  r.id = req.id();
  RETURN_IF_ERROR(AssembleKServeRequest(inputs, r));
  for (const auto& o : req.outputs()) r.outputs.push_back({o.name(), std::nullopt});
  if (auto p = req.parameters().find("truncate"); p != req.parameters().end()) {
    if (p->second.parameter_choice_case() != inference::InferParameter::kBoolParam)
      return InvalidArgument("parameter truncate must be a bool_param");
    r.truncate = p->second.bool_param();
  }
  return r;
}

// Outputs go in raw_output_contents (little-endian FP32), which is where
// tritonclient reads them from.
void EncodeResponse(const KServeRequest& request, const ServedModel& model,
                    const std::vector<OutputTensor>& outputs, ModelInferResponse& resp) {
  resp.set_model_name(model.name());
  resp.set_model_version(model.version());
  resp.set_id(request.id);
  for (const OutputTensor& o : outputs) {
    auto* out = resp.add_outputs();
    out->set_name(o.name);
    out->set_datatype(o.datatype);
    for (int64_t d : o.shape) out->add_shape(d);
    resp.add_raw_output_contents(reinterpret_cast<const char*>(o.data.data()),
                                 o.data.size() * sizeof(float));
  }
}

void FillTensorMetadata(const TensorMetadata& t,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(t.name);
  out->set_datatype(t.datatype);
  for (int64_t d : t.shape) out->add_shape(d);
}

void FillDuration(const DurationStat& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

void FillStatistics(const std::string& name, const std::string& version, const ModelStatistics& s,
                    inference::ModelStatistics& out) {
  out.set_name(name);
  out.set_version(version);
  out.set_last_inference(s.last_inference_ms);
  out.set_inference_count(s.inference_count);
  out.set_execution_count(s.execution_count);
  inference::InferStatistics* is = out.mutable_inference_stats();
  FillDuration(s.success, is->mutable_success());
  FillDuration(s.fail, is->mutable_fail());
  FillDuration(s.queue, is->mutable_queue());
  FillDuration(s.compute_input, is->mutable_compute_input());
  FillDuration(s.compute_infer, is->mutable_compute_infer());
  FillDuration(s.compute_output, is->mutable_compute_output());
  is->mutable_cache_hit();
  is->mutable_cache_miss();
  // A batch's engine time covers its inputs' upload and outputs' download:
  // all of it is compute_infer.
  for (const auto& [size, d] : s.batches) {
    inference::InferBatchStatistics* b = out.add_batch_stats();
    b->set_batch_size(size);
    FillDuration(d, b->mutable_compute_infer());
    b->mutable_compute_input();
    b->mutable_compute_output();
  }
}

}  // namespace

class GrpcServer::Service final : public inference::GRPCInferenceService::Service {
 public:
  Service(ModelRegistry& registry, Metrics& metrics, const GrpcOptions& options)
      : registry_(registry), metrics_(metrics), options_(options) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* resp) override {
    resp->set_live(true);
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* resp) override {
    resp->set_ready(registry_.Readiness().ok());
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext* ctx, const inference::ModelReadyRequest* req,
                          inference::ModelReadyResponse* resp) override {
    if (auto denied = Authorize(ctx, "grpc_ready")) return *denied;
    // An unknown model is simply not ready (KServe answers a bool here).
    resp->set_ready(registry_.Find(req->name(), req->version()).ok());
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext* ctx, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* resp) override {
    if (auto denied = Authorize(ctx, "grpc_server")) return *denied;
    resp->set_name("bertrt");
    resp->set_version(BERTRT_VERSION);
    resp->add_extensions("model_repository");
    resp->add_extensions("binary_tensor_data");
    resp->add_extensions("model_configuration");
    resp->add_extensions("statistics");
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext* ctx, const inference::ModelMetadataRequest* req,
                             inference::ModelMetadataResponse* resp) override {
    if (auto denied = Authorize(ctx, "grpc_metadata")) return *denied;
    auto model = registry_.Find(req->name(), req->version());
    if (!model.ok()) return ToGrpc(model.status());
    const ServedModel& m = **model;
    resp->set_name(m.name());
    resp->add_versions(m.version());
    resp->set_platform("bertrt_" + m.device());
    for (const TensorMetadata& t : InputMetadata()) FillTensorMetadata(t, resp->add_inputs());
    for (const TensorMetadata& t : OutputMetadata(m)) FillTensorMetadata(t, resp->add_outputs());
    return grpc::Status::OK;
  }

  grpc::Status ModelConfig(grpc::ServerContext* ctx, const inference::ModelConfigRequest* req,
                           inference::ModelConfigResponse* resp) override {
    if (auto denied = Authorize(ctx, "grpc_config")) return *denied;
    auto model = registry_.Find(req->name(), req->version());
    if (!model.ok()) return ToGrpc(model.status());
    FillModelConfig(**model, *resp->mutable_config());
    return grpc::Status::OK;
  }

  // An empty name: every model; an empty version: every served version.
  grpc::Status ModelStatistics(grpc::ServerContext* ctx,
                               const inference::ModelStatisticsRequest* req,
                               inference::ModelStatisticsResponse* resp) override {
    if (auto denied = Authorize(ctx, "grpc_stats")) return *denied;
    if (!req->name().empty()) {
      auto found = registry_.Find(req->name(), req->version());
      if (!found.ok()) return ToGrpc(found.status());
    } else if (!req->version().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a version without a model name; give the name too");
    }
    for (const auto& m : registry_.Served()) {
      if (!req->name().empty() && m->name() != req->name()) continue;
      if (!req->version().empty() && m->version() != req->version()) continue;
      FillStatistics(m->name(), m->version(), m->statistics().Snapshot(), *resp->add_model_stats());
    }
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext* ctx, const ModelInferRequest* req,
                          ModelInferResponse* resp) override {
    if (auto denied = Authorize(ctx, "grpc_infer")) return *denied;
    return ToGrpc(Infer(ctx, *req, *resp, "grpc_infer"));
  }

  // Requests on one stream are answered one by one, in order; a failed one
  // gets error_message and the stream goes on.
  grpc::Status ModelStreamInfer(grpc::ServerContext* ctx,
                                grpc::ServerReaderWriter<inference::ModelStreamInferResponse,
                                                         ModelInferRequest>* stream) override {
    if (auto denied = Authorize(ctx, "grpc_stream_infer")) return *denied;
    ModelInferRequest req;
    while (stream->Read(&req)) {
      inference::ModelStreamInferResponse resp;
      Status st = Infer(ctx, req, *resp.mutable_infer_response(), "grpc_stream_infer");
      if (!st.ok()) {
        resp.clear_infer_response();
        resp.set_error_message(std::string(StatusCodeName(st.code())) + ": " + st.message());
        // The client can match the error to its request by id.
        resp.mutable_infer_response()->set_id(req.id());
        resp.mutable_infer_response()->set_model_name(req.model_name());
        resp.mutable_infer_response()->set_model_version(req.model_version());
      }
      if (!stream->Write(resp)) break;  // the client went away
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext* ctx,
                               const inference::RepositoryIndexRequest* req,
                               inference::RepositoryIndexResponse* resp) override {
    if (auto denied = Authorize(ctx, "grpc_repository")) return *denied;
    for (const auto& e : registry_.Index()) {
      if (req->ready() && e.state != "READY") continue;
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx,
                                   const inference::RepositoryModelLoadRequest* req,
                                   inference::RepositoryModelLoadResponse*) override {
    if (auto denied = Authorize(ctx, "grpc_repository")) return *denied;
    Status st = registry_.Load(req->model_name());
    metrics_.CountRequest(st.ok() ? req->model_name() : "", "grpc_model_load", st.ok());
    return ToGrpc(st);
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx,
                                     const inference::RepositoryModelUnloadRequest* req,
                                     inference::RepositoryModelUnloadResponse*) override {
    if (auto denied = Authorize(ctx, "grpc_repository")) return *denied;
    Status st = registry_.Unload(req->model_name());
    metrics_.CountRequest(st.ok() ? req->model_name() : "", "grpc_model_unload", st.ok());
    return ToGrpc(st);
  }

 private:
  // UNAUTHENTICATED (and a failed `endpoint` request) without the API key.
  std::optional<grpc::Status> Authorize(grpc::ServerContext* ctx, const char* endpoint) {
    if (options_.api_key.empty()) return std::nullopt;
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    std::string_view value;
    if (it != md.end()) value = std::string_view(it->second.data(), it->second.size());
    if (BearerKeyMatches(value, options_.api_key)) return std::nullopt;
    // No model label: it would come from an unauthenticated client.
    metrics_.CountRequest("", endpoint, false);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "unauthorized: a Bearer API key is required (metadata "
                        "authorization: Bearer <key>); missing or wrong");
  }

  Status Infer(grpc::ServerContext* ctx, const ModelInferRequest& req, ModelInferResponse& resp,
               const char* endpoint) {
    InFlightGuard in_flight(metrics_);
    const auto start = std::chrono::steady_clock::now();
    std::string model_name;
    Status st = [&]() -> Status {
      ASSIGN_OR_RETURN(auto model, registry_.Find(req.model_name(), req.model_version()));
      model_name = model->name();
      ASSIGN_OR_RETURN(KServeRequest request, DecodeRequest(req));
      // The scheduler polls this before compute: a client that cancelled or
      // disconnected costs no engine time.
      ASSIGN_OR_RETURN(
          std::vector<OutputTensor> outputs,
          InferKServe(*model, metrics_, request, [ctx] { return ctx->IsCancelled(); }));
      EncodeResponse(request, *model, outputs, resp);
      return Status::Ok();
    }();
    metrics_.CountRequest(model_name, endpoint, st.ok());
    if (options_.log_requests) {
      const auto id = ctx->client_metadata().find("x-request-id");
      const std::string given = id == ctx->client_metadata().end()
                                    ? ""
                                    : std::string(id->second.data(), id->second.size());
      LogRequest({{"request_id", RequestId(given)},
                  {"protocol", "grpc"},
                  {"method", endpoint},
                  {"model", req.model_name()},
                  {"status", StatusCodeName(st.code())},
                  {"remote", ctx->peer()}},
                 start);
    }
    return st;
  }

  ModelRegistry& registry_;
  Metrics& metrics_;
  const GrpcOptions& options_;
};

GrpcServer::GrpcServer(ModelRegistry& registry, Metrics& metrics, GrpcOptions options)
    : registry_(registry), metrics_(metrics), options_(std::move(options)) {
  service_ = std::make_unique<Service>(registry_, metrics_, options_);
}

GrpcServer::~GrpcServer() {
  if (server_) {
    // Without an earlier Stop (an error path), open streams are cancelled at once.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

Status GrpcServer::Start() {
  const std::string address = options_.host + ":" + std::to_string(options_.port);
  grpc::ServerBuilder builder;
  int bound = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options_.tls.cert.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options_.tls.key, options_.tls.cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(address, credentials, &bound);
  // Without this, Linux lets a second server share the port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<size_t>(options_.max_message_bytes, std::numeric_limits<int>::max())));
  builder.SetMaxSendMessageSize(-1);  // answers (last_hidden_state) may be large
  grpc::ResourceQuota quota("bertrt_grpc");
  quota.SetMaxThreads(options_.max_threads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || bound == 0) {
    server_.reset();
    return Unavailable("cannot listen for gRPC on " + address +
                       " (in use, or not an address of this machine); pick another "
                       "--grpc-port or 0 to turn gRPC off");
  }
  return Status::Ok();
}

void GrpcServer::Stop(std::chrono::milliseconds grace) {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + grace);
}

void GrpcServer::Wait() {
  if (server_) server_->Wait();
}

}  // namespace bertrt::server

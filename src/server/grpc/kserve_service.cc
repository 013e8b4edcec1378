#include "server/grpc/kserve_service.h"

#include <chrono>
#include <optional>

#include "grpc_service.pb.h"
#include "server/common/auth.h"
#include "server/common/kserve.h"
#include "server/common/request_log.h"
#include "server/common/triton_config.h"
#include "server/grpc/proto_method.h"

namespace bertrt::server {
using serving::DurationStat;
using serving::ModelRegistry;
using serving::ModelStatistics;
using serving::RequestTimer;
using serving::ServedModel;
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using Kind = GrpcMethod::Kind;

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

StatusOr<KServeRequest> DecodeRequest(const ModelInferRequest& req, const ServedModel& model) {
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
  RETURN_IF_ERROR(AssembleKServeRequest(inputs, model.scheduler().options(), r));
  for (const auto& o : req.outputs()) {
    RequestedOutput out{o.name(), std::nullopt};
    // tritonclient's class_count (Triton's classification extension).
    if (auto p = o.parameters().find("classification"); p != o.parameters().end()) {
      if (p->second.parameter_choice_case() != inference::InferParameter::kInt64Param ||
          p->second.int64_param() < 0)
        return InvalidArgument("output \"" + o.name() +
                               "\": parameter classification must be an int64_param count of "
                               "classes (0 for the values themselves)");
      out.class_count = p->second.int64_param();
    }
    r.outputs.push_back(std::move(out));
  }
  if (auto p = req.parameters().find("truncate"); p != req.parameters().end()) {
    if (p->second.parameter_choice_case() != inference::InferParameter::kBoolParam)
      return InvalidArgument("parameter truncate must be a bool_param");
    r.truncate = p->second.bool_param();
  }
  return r;
}

// Outputs go in raw_output_contents (RawTensorBytes), which is where
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
    resp.add_raw_output_contents(RawTensorBytes(o));
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

// What the methods share (each holds it), and inference.
class KServe {
 public:
  KServe(ModelRegistry& registry, Metrics& metrics, const GrpcOptions& options)
      : registry_(registry), metrics_(metrics), options_(options) {}

  Status Infer(const GrpcCallInfo& call, const ModelInferRequest& req, ModelInferResponse& resp,
               const char* endpoint) {
    InFlightGuard in_flight(metrics_);
    const auto start = std::chrono::steady_clock::now();
    std::string model_name;
    Status st = [&]() -> Status {
      ASSIGN_OR_RETURN(auto model, registry_.Find(req.model_name(), req.model_version()));
      model_name = model->name();
      ASSIGN_OR_RETURN(KServeRequest request, DecodeRequest(req, *model));
      RequestTimer timer(*model, &metrics_, start);
      // The scheduler polls this before compute: a client that cancelled or
      // disconnected costs no engine time.
      serving::Infer infer(*model, timer,
                           [cancelled = call.cancelled] { return cancelled->load(); });
      auto outputs = InferKServe(infer, request);
      if (outputs.ok()) EncodeResponse(request, *model, *outputs, resp);
      timer.Finish(outputs.status());
      return outputs.status();
    }();
    metrics_.CountRequest(model_name, endpoint, st);
    if (options_.log_requests) {
      nlohmann::json line = {{"request_id", RequestId(call.request_id)},
                             {"protocol", "grpc"},
                             {"method", endpoint},
                             {"model", req.model_name()},
                             {"status", StatusCodeName(st.code())},
                             {"remote", call.peer}};
      AddTraceContext(line, call.traceparent);
      LogRequest(std::move(line), start);
    }
    return st;
  }

  ModelRegistry& registry_;
  Metrics& metrics_;
  const GrpcOptions& options_;
};

// UNAUTHENTICATED (and a failed `endpoint` request) without the API key; run
// when the call's headers arrive, before its message is read.
std::function<std::optional<GrpcReply>(const GrpcCallInfo&)> RequireKey(std::shared_ptr<KServe> k,
                                                                        const char* endpoint) {
  if (k->options_.api_key.empty()) return {};
  return [k, endpoint](const GrpcCallInfo& call) -> std::optional<GrpcReply> {
    if (BearerKeyMatches(call.authorization, k->options_.api_key)) return std::nullopt;
    // No model label: it would come from an unauthenticated client.
    k->metrics_.CountRequest("", endpoint, 401);
    return GrpcReply::Error(GrpcCode::kUnauthenticated,
                            "unauthorized: a Bearer API key is required (metadata "
                            "authorization: Bearer <key>); missing or wrong");
  };
}

GrpcReply Reply(const Status& st) { return st.ok() ? GrpcReply::Ok("") : GrpcError(st); }

}  // namespace

GrpcReply GrpcError(const Status& st) {
  GrpcCode code = GrpcCode::kInternal;
  switch (st.code()) {
    case StatusCode::kOk:
      code = GrpcCode::kOk;
      break;
    case StatusCode::kInvalidArgument:
      code = GrpcCode::kInvalidArgument;
      break;
    case StatusCode::kNotFound:
      code = GrpcCode::kNotFound;
      break;
    case StatusCode::kOutOfRange:  // an input longer than the model takes (HTTP: 413)
      code = GrpcCode::kOutOfRange;
      break;
    case StatusCode::kUnimplemented:
      code = GrpcCode::kUnimplemented;
      break;
    case StatusCode::kFailedPrecondition:
      code = GrpcCode::kFailedPrecondition;
      break;
    case StatusCode::kResourceExhausted:
      code = GrpcCode::kResourceExhausted;
      break;
    case StatusCode::kDeadlineExceeded:
      code = GrpcCode::kDeadlineExceeded;
      break;
    case StatusCode::kUnavailable:
      code = GrpcCode::kUnavailable;
      break;
    case StatusCode::kDataLoss:
      code = GrpcCode::kDataLoss;
      break;
    case StatusCode::kInternal:
      break;
  }
  return GrpcReply::Error(code, st.message());
}

std::vector<std::pair<std::string, GrpcMethod>> KServeMethods(ModelRegistry& registry,
                                                              Metrics& metrics,
                                                              const GrpcOptions& options) {
  auto k = std::make_shared<KServe>(registry, metrics, options);
  std::vector<std::pair<std::string, GrpcMethod>> methods;
  auto add = [&](const char* name, GrpcMethod method) {
    methods.emplace_back(std::string("/inference.GRPCInferenceService/") + name, std::move(method));
  };
  using namespace inference;
  // Liveness and readiness stay open (orchestrators' probes send no key) and
  // answer on the I/O thread, however busy the handlers are.
  add("ServerLive", {Kind::kUnary,
                     true,
                     {},
                     ProtoHandler<ServerLiveRequest, ServerLiveResponse>(
                         [](const GrpcCallInfo&, const auto&, auto& resp) {
                           resp.set_live(true);
                           return GrpcReply::Ok("");
                         })});
  add("ServerReady", {Kind::kUnary,
                      true,
                      {},
                      ProtoHandler<ServerReadyRequest, ServerReadyResponse>(
                          [k](const GrpcCallInfo&, const auto&, auto& resp) {
                            resp.set_ready(k->registry_.Readiness().ok());
                            return GrpcReply::Ok("");
                          })});
  add("ModelReady", {Kind::kUnary, false, RequireKey(k, "grpc_ready"),
                     ProtoHandler<ModelReadyRequest, ModelReadyResponse>(
                         [k](const GrpcCallInfo&, const auto& req, auto& resp) {
                           // An unknown model is simply not ready (KServe answers a bool).
                           resp.set_ready(k->registry_.Find(req.name(), req.version()).ok());
                           return GrpcReply::Ok("");
                         })});
  add("ServerMetadata", {Kind::kUnary, false, RequireKey(k, "grpc_server"),
                         ProtoHandler<ServerMetadataRequest, ServerMetadataResponse>(
                             [](const GrpcCallInfo&, const auto&, auto& resp) {
                               resp.set_name("bertrt");
                               resp.set_version(BERTRT_VERSION);
                               for (const char* e : {"model_repository", "binary_tensor_data",
                                                     "model_configuration", "statistics"})
                                 resp.add_extensions(e);
                               return GrpcReply::Ok("");
                             })});
  add("ModelMetadata", {Kind::kUnary, false, RequireKey(k, "grpc_metadata"),
                        ProtoHandler<ModelMetadataRequest, ModelMetadataResponse>(
                            [k](const GrpcCallInfo&, const auto& req, auto& resp) {
                              auto model = k->registry_.Find(req.name(), req.version());
                              if (!model.ok()) return GrpcError(model.status());
                              const ServedModel& m = **model;
                              resp.set_name(m.name());
                              resp.add_versions(m.version());
                              resp.set_platform("bertrt_" + m.device());
                              for (const TensorMetadata& t : InputMetadata())
                                FillTensorMetadata(t, resp.add_inputs());
                              for (const TensorMetadata& t : OutputMetadata(m))
                                FillTensorMetadata(t, resp.add_outputs());
                              return GrpcReply::Ok("");
                            })});
  add("ModelConfig", {Kind::kUnary, false, RequireKey(k, "grpc_config"),
                      ProtoHandler<ModelConfigRequest, ModelConfigResponse>(
                          [k](const GrpcCallInfo&, const auto& req, auto& resp) {
                            auto model = k->registry_.Find(req.name(), req.version());
                            if (!model.ok()) return GrpcError(model.status());
                            FillModelConfig(**model, *resp.mutable_config());
                            return GrpcReply::Ok("");
                          })});
  // An empty name: every model; an empty version: every served version.
  add("ModelStatistics",
      {Kind::kUnary, false, RequireKey(k, "grpc_stats"),
       ProtoHandler<ModelStatisticsRequest, ModelStatisticsResponse>(
           [k](const GrpcCallInfo&, const auto& req, auto& resp) {
             if (!req.name().empty()) {
               auto found = k->registry_.Find(req.name(), req.version());
               if (!found.ok()) return GrpcError(found.status());
             } else if (!req.version().empty()) {
               return GrpcReply::Error(GrpcCode::kInvalidArgument,
                                       "a version without a model name; give the name too");
             }
             for (const auto& m : k->registry_.Served()) {
               if (!req.name().empty() && m->name() != req.name()) continue;
               if (!req.version().empty() && m->version() != req.version()) continue;
               FillStatistics(m->name(), m->version(), m->statistics().Snapshot(),
                              *resp.add_model_stats());
             }
             return GrpcReply::Ok("");
           })});
  add("ModelInfer", {Kind::kUnary, false, RequireKey(k, "grpc_infer"),
                     ProtoHandler<ModelInferRequest, ModelInferResponse>(
                         [k](const GrpcCallInfo& call, const auto& req, auto& resp) {
                           return Reply(k->Infer(call, req, resp, "grpc_infer"));
                         })});
  // Requests on one stream are answered one by one, in order; a failed one
  // gets error_message and the stream goes on.
  add("ModelStreamInfer",
      {Kind::kBidiStream, false, RequireKey(k, "grpc_stream_infer"),
       ProtoHandler<ModelInferRequest, ModelStreamInferResponse>(
           [k](const GrpcCallInfo& call, const auto& req, auto& resp) {
             Status st = k->Infer(call, req, *resp.mutable_infer_response(), "grpc_stream_infer");
             if (!st.ok()) {
               resp.clear_infer_response();
               resp.set_error_message(std::string(StatusCodeName(st.code())) + ": " + st.message());
               // The client can match the error to its request by id.
               resp.mutable_infer_response()->set_id(req.id());
               resp.mutable_infer_response()->set_model_name(req.model_name());
               resp.mutable_infer_response()->set_model_version(req.model_version());
             }
             return GrpcReply::Ok("");
           })});
  add("RepositoryIndex", {Kind::kUnary, false, RequireKey(k, "grpc_repository"),
                          ProtoHandler<RepositoryIndexRequest, RepositoryIndexResponse>(
                              [k](const GrpcCallInfo&, const auto& req, auto& resp) {
                                for (const auto& e : k->registry_.Index()) {
                                  if (req.ready() && e.state != "READY") continue;
                                  auto* m = resp.add_models();
                                  m->set_name(e.name);
                                  m->set_version(e.version);
                                  m->set_state(e.state);
                                  m->set_reason(e.reason);
                                }
                                return GrpcReply::Ok("");
                              })});
  add("RepositoryModelLoad", {Kind::kUnary, false, RequireKey(k, "grpc_repository"),
                              ProtoHandler<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
                                  [k](const GrpcCallInfo&, const auto& req, auto&) {
                                    std::vector<std::pair<std::string, std::optional<std::string>>>
                                        named;
                                    for (const auto& [key, value] : req.parameters())
                                      named.emplace_back(
                                          key, value.has_string_param()
                                                   ? std::optional(value.string_param())
                                                   : std::nullopt);
                                    auto config = LoadConfigParameter(named);
                                    Status st = config.ok()
                                                    ? k->registry_.Load(req.model_name(), *config)
                                                    : config.status();
                                    k->metrics_.CountRequest(st.ok() ? req.model_name() : "",
                                                             "grpc_model_load", st);
                                    return Reply(st);
                                  })});
  add("RepositoryModelUnload",
      {Kind::kUnary, false, RequireKey(k, "grpc_repository"),
       ProtoHandler<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
           [k](const GrpcCallInfo&, const auto& req, auto&) {
             Status st = k->registry_.Unload(req.model_name());
             k->metrics_.CountRequest(st.ok() ? req.model_name() : "", "grpc_model_unload", st);
             return Reply(st);
           })});
  return methods;
}

}  // namespace bertrt::server

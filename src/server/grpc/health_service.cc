#include "server/grpc/health_service.h"

#include <algorithm>
#include <optional>

#include "health.pb.h"
#include "server/common/auth.h"
#include "server/grpc/proto_method.h"

namespace bertrt::server {
using serving::ModelRegistry;
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// What a Check or Watch of one service finds: the call refused
// (UNAUTHENTICATED: a model asked about without the API key), or the service's
// status (none for a service this server does not know).
struct Found {
  std::optional<GrpcReply> refused;
  std::optional<HealthCheckResponse::ServingStatus> status;
};

Found Look(const ModelRegistry& registry, const GrpcOptions& options, const GrpcCallInfo& call,
           const std::string& service) {
  if (service.empty() || service == "inference.GRPCInferenceService")
    return {std::nullopt, registry.Readiness().ok() ? HealthCheckResponse::SERVING
                                                    : HealthCheckResponse::NOT_SERVING};
  if (!BearerKeyMatches(call.authorization, options.api_key))
    return {GrpcReply::Error(GrpcCode::kUnauthenticated,
                             "unauthorized: a model's health needs the Bearer API key (metadata "
                             "authorization: Bearer <key>); service \"\" (the server) does not"),
            std::nullopt};
  if (registry.Find(service).ok()) return {std::nullopt, HealthCheckResponse::SERVING};
  // Known to the repository but not served (unloaded, or failed to load).
  const auto index = registry.Index();
  if (std::any_of(index.begin(), index.end(), [&](const auto& e) { return e.name == service; }))
    return {std::nullopt, HealthCheckResponse::NOT_SERVING};
  return {};
}

}  // namespace

std::vector<std::pair<std::string, GrpcMethod>> HealthMethods(const ModelRegistry& registry,
                                                              const GrpcOptions& options) {
  using Kind = GrpcMethod::Kind;
  const ModelRegistry* r = &registry;
  const GrpcOptions* o = &options;
  // Both answer on the I/O thread: a probe is not queued behind inference.
  auto check = ProtoHandler<HealthCheckRequest, HealthCheckResponse>(
      [r, o](const GrpcCallInfo& call, const HealthCheckRequest& req, HealthCheckResponse& resp) {
        const Found found = Look(*r, *o, call, req.service());
        if (found.refused) return *found.refused;
        if (!found.status)
          return GrpcReply::Error(GrpcCode::kNotFound,
                                  "unknown service \"" + req.service() +
                                      "\": ask about \"\" (the server) or a model's name");
        resp.set_status(*found.status);
        return GrpcReply::Ok("");
      });
  auto watch = ProtoHandler<HealthCheckRequest, HealthCheckResponse>(
      [r, o](const GrpcCallInfo& call, const HealthCheckRequest& req, HealthCheckResponse& resp) {
        const Found found = Look(*r, *o, call, req.service());
        if (found.refused) return *found.refused;
        // An unknown service may yet appear (a model loaded later): watched on.
        resp.set_status(found.status.value_or(HealthCheckResponse::SERVICE_UNKNOWN));
        return GrpcReply::Ok("");
      });
  return {{"/grpc.health.v1.Health/Check", {Kind::kUnary, true, {}, std::move(check)}},
          {"/grpc.health.v1.Health/Watch", {Kind::kWatch, true, {}, std::move(watch)}}};
}

}  // namespace bertrt::server

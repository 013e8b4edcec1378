// The standard gRPC health service, grpc.health.v1.Health (proto/health.proto),
// for Kubernetes' gRPC probes and load balancers. Service "" (and
// "inference.GRPCInferenceService") is the server's readiness, the same as
// ServerReady and /v2/health/ready, and needs no API key: probes send no
// headers. A model's name asks whether that model is served; with --api-key
// set, that needs the key, since it tells which models exist.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "serving/model_registry.h"
#include "server/grpc/grpc_method.h"
#include "server/grpc/grpc_options.h"

namespace bertrt::server {

// Check and Watch, by path. Watch sends the status, then each change (looked
// at every kWatchInterval, holding no thread), until the client goes.
std::vector<std::pair<std::string, GrpcMethod>> HealthMethods(const serving::ModelRegistry& registry,
                                                              const GrpcOptions& options);

}  // namespace bertrt::server

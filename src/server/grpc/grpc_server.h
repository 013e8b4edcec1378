// The gRPC front end: KServe v2's inference.GRPCInferenceService (the same wire
// format as Triton's, so tritonclient.grpc works unchanged) and the standard
// grpc.health.v1.Health, served over bertrt's own HTTP/2 transport (nghttp2
// under Asio: grpc_transport.h, grpc_session.h) rather than grpc++, whose
// Debian 1.51 has no defence against idle streams holding its threads or the
// HTTP/2 "rapid reset" attack (issue 44). The services (kserve_service.h,
// health_service.h) only map messages and statuses.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "server/common/metrics.h"
#include "serving/model_registry.h"
#include "server/grpc/grpc_method.h"
#include "server/grpc/grpc_options.h"

namespace bertrt::server {

class GrpcTransport;

class GrpcServer {
 public:
  GrpcServer(serving::ModelRegistry& registry, Metrics& metrics, GrpcOptions options);
  ~GrpcServer();

  // Binds and starts serving (on threads of its own); Unavailable when the
  // address cannot be bound.
  Status Start();
  // Stops taking calls (GOAWAY) and lets those in flight finish; streams
  // waiting on their client end at once (UNAVAILABLE), calls still running
  // after `grace` are cancelled. Returns at once.
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Returns once the server has stopped.
  void Wait();

 private:
  GrpcOptions options_;
  std::unordered_map<std::string, GrpcMethod> methods_;  // by path
  std::unique_ptr<GrpcTransport> transport_;
};

}  // namespace bertrt::server

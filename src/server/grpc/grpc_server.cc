#include "server/grpc/grpc_server.h"

#include "server/grpc/grpc_transport.h"
#include "server/grpc/health_service.h"
#include "server/grpc/kserve_service.h"

namespace bertrt::server {
using serving::ModelRegistry;

GrpcServer::GrpcServer(ModelRegistry& registry, Metrics& metrics, GrpcOptions options)
    : options_(std::move(options)) {
  for (auto& [path, method] : KServeMethods(registry, metrics, options_))
    methods_.emplace(std::move(path), std::move(method));
  for (auto& [path, method] : HealthMethods(registry, options_))
    methods_.emplace(std::move(path), std::move(method));
  transport_ = std::make_unique<GrpcTransport>(options_, [this](std::string_view path) {
    auto it = methods_.find(std::string(path));
    return it == methods_.end() ? nullptr : &it->second;
  });
}

GrpcServer::~GrpcServer() = default;

Status GrpcServer::Start() { return transport_->Start(); }

void GrpcServer::Stop(std::chrono::milliseconds grace) { transport_->Stop(grace); }

void GrpcServer::Wait() { transport_->Wait(); }

}  // namespace bertrt::server

// The gRPC front end: KServe v2's inference.GRPCInferenceService (the same
// wire format as Triton's, so tritonclient.grpc works unchanged). Protobuf
// requests decode into the shared KServeRequest and answers encode from the
// shared OutputTensor (server/common/kserve.h), so both front ends apply one
// set of rules; this file only maps messages and statuses.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "server/common/metrics.h"
#include "server/common/served_model.h"
#include "server/common/tls.h"

namespace grpc {
class Server;
}

namespace bertrt::server {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 8001;
  size_t max_message_bytes = 8 << 20;  // larger requests: RESOURCE_EXHAUSTED
  int max_threads = 256;               // handlers block on the batcher
  // When non-empty, every RPC but ServerLive and ServerReady needs the
  // metadata `authorization: Bearer <api_key>`; otherwise UNAUTHENTICATED.
  std::string api_key;
  // PEM certificate and key: TLS instead of plaintext (checked by LoadTls).
  TlsPem tls;
  // One JSON line per ModelInfer / stream request on stderr (request id from
  // the client's x-request-id metadata, else one made here for the log).
  bool log_requests = false;
};

class GrpcServer {
 public:
  GrpcServer(ModelRegistry& registry, Metrics& metrics, GrpcOptions options);
  ~GrpcServer();

  // Binds and starts serving (on gRPC's own threads); Unavailable when the
  // address cannot be bound.
  Status Start();
  // Stops taking RPCs and waits for in-flight ones; streams still open after
  // `grace` are cancelled.
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Returns once the server has stopped.
  void Wait();

 private:
  class Service;
  ModelRegistry& registry_;
  Metrics& metrics_;
  GrpcOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace bertrt::server

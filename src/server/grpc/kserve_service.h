// KServe v2's inference.GRPCInferenceService (the same wire format as
// Triton's, so tritonclient.grpc works unchanged) as gRPC methods. Protobuf
// requests decode into the shared KServeRequest and answers encode from the
// shared OutputTensor (server/common/kserve.h), so both front ends apply one
// set of rules; this file only maps messages and statuses.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bertrt/status.h"
#include "server/common/metrics.h"
#include "serving/model_registry.h"
#include "server/grpc/grpc_method.h"
#include "server/grpc/grpc_options.h"

namespace bertrt::server {

// The gRPC status for a bertrt Status (OutOfRange stays OUT_OF_RANGE: an input
// longer than the model takes).
GrpcReply GrpcError(const Status& status);

// The service's methods, by path ("/inference.GRPCInferenceService/ModelInfer").
// Every one but ServerLive and ServerReady needs the API key when one is set.
// The references are kept by the methods.
std::vector<std::pair<std::string, GrpcMethod>> KServeMethods(serving::ModelRegistry& registry,
                                                              Metrics& metrics,
                                                              const GrpcOptions& options);

}  // namespace bertrt::server

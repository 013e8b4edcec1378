// A GrpcMethod's handler written over protobuf messages: the request parsed,
// the response serialized, the handler in between. Shared by the services.
#pragma once

#include <string>
#include <utility>

#include "server/grpc/grpc_method.h"

namespace bertrt::server {

// `fn(call, request, response)` returns the call's status (GrpcReply without
// a body); on kOk the response is what the client gets.
template <class Request, class Response, class Fn>
auto ProtoHandler(Fn fn) {
  return [fn = std::move(fn)](const GrpcCallInfo& call, const std::string& bytes) -> GrpcReply {
    Request request;
    if (!request.ParseFromString(bytes))
      return GrpcReply::Error(GrpcCode::kInvalidArgument,
                              "the request is not a valid " + request.GetTypeName() + " message");
    Response response;
    GrpcReply reply = fn(call, request, response);
    if (!reply.ok()) return reply;
    return GrpcReply::Ok(response.SerializeAsString());
  };
}

}  // namespace bertrt::server

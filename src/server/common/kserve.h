// KServe v2 (Open Inference Protocol) JSON: request decoding to native types,
// response and metadata encoding. Shared by the HTTP front end and, later,
// gRPC (which carries the same tensors in protobuf).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/common/served_model.h"

namespace bertrt::server {

struct KServeRequest {
  std::string id;
  // Either texts (BYTES "text" [+ "text_pair"]) ...
  std::vector<TextInput> texts;
  // ... or token ids ("input_ids" [+ "attention_mask", "token_type_ids"], [N, S]).
  std::vector<SequenceInput> sequences;
  // For ids: the positions of row i that the mask kept, so per-token outputs
  // go back to where the client's tokens were.
  std::vector<std::vector<int>> positions;
  int padded_len = 0;                // S of the ids input
  std::vector<std::string> outputs;  // requested; empty: the head's outputs
  bool truncate = false;             // parameters.truncate, for texts
};

// InvalidArgument says which input and what was wrong (name, datatype, shape).
StatusOr<KServeRequest> DecodeKServeRequest(const nlohmann::json& body);

// Checks the requested outputs against the model (NotFound-free: unknown
// names are InvalidArgument, as they are the client's mistake).
Status CheckRequestedOutputs(const KServeRequest& request, const ServedModel& model);

// {"model_name", "model_version", "id", "outputs": [{name, datatype, shape, data}]}.
// Per-token outputs are [N, S(, width)], zero where a row has no token.
nlohmann::json EncodeKServeResponse(const KServeRequest& request, const ServedModel& model,
                                    const InferResult& result);

// GET /v2/models/{m}: name, versions, platform, inputs and outputs as served.
nlohmann::json ModelMetadata(const ServedModel& model);

}  // namespace bertrt::server

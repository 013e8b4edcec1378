// KServe v2 (Open Inference Protocol): one native request form and one native
// output form, shared by every wire format. JSON (with or without the binary
// tensor data extension) and gRPC's protobuf each only turn their tensors into
// InputTensor and their answers out of OutputTensor; which inputs mean what,
// shapes, datatypes and ranges are checked once, in AssembleKServeRequest.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/metrics.h"
#include "serving/infer.h"
#include "serving/model_registry.h"

namespace bertrt::server {

// One input as a front end received it, its elements already native: BYTES in
// `strings`, INT32/INT64 in `ints`. Other datatypes carry no data (no input of
// bertrt takes them), so the error can name the datatype.
struct InputTensor {
  std::string name, datatype;
  std::vector<int64_t> shape;
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
};

struct RequestedOutput {
  std::string name;
  // HTTP binary extension: parameters.binary_data; unset: the request's
  // binary_data_output.
  std::optional<bool> binary;
  // Triton's classification extension (parameters.classification, what
  // tritonclient's class_count sets): > 0 returns, instead of the values, the
  // top class_count of each row (each token's, for per-token outputs) as BYTES
  // "value:index[:label]", largest first.
  int64_t class_count = 0;
};

struct KServeRequest {
  std::string id;
  // Either texts (BYTES "text" [+ "text_pair"]) ...
  std::vector<serving::TextInput> texts;
  // ... or token ids ("input_ids" [+ "attention_mask", "token_type_ids"], [N, S]).
  std::vector<SequenceInput> sequences;
  // For ids: the positions of row i that the mask kept, so per-token outputs
  // go back to where the client's tokens were.
  std::vector<std::vector<int>> positions;
  // S of the ids input; once run, S of the per-token outputs.
  int padded_len = 0;
  std::vector<RequestedOutput> outputs;  // empty: the head's outputs
  bool truncate = false;                 // parameters.truncate: cut what is too long
  bool binary_output = false;            // parameters.binary_data_output (HTTP)
};

// One answer tensor, before any wire format: FP32 [N, width] or [N, S(, width)]
// in `data`, or BYTES (classification) [N, k] or [N, S, k] in `strings`.
struct OutputTensor {
  std::string name;
  std::string datatype = "FP32";
  std::vector<int64_t> shape;
  std::vector<float> data;
  std::vector<std::string> strings;
  bool binary = false;  // HTTP: sent as raw bytes after the JSON header
};

// The tensor's bytes as the binary extensions carry them (HTTP binary data,
// gRPC raw_output_contents): FP32 little-endian, or each BYTES element a
// 4-byte little-endian length then its bytes.
std::string RawTensorBytes(const OutputTensor& tensor);

// The element count of `shape`; InvalidArgument for negative dimensions or a
// count beyond what any request could carry.
StatusOr<int64_t> ElementCount(const std::vector<int64_t>& shape, const std::string& input);

// Decodes the raw little-endian bytes of one tensor (the HTTP binary extension
// and gRPC's raw_input_contents): BYTES elements are a 4-byte length then the
// bytes. Sizes that do not match the shape are InvalidArgument.
Status DecodeRawTensor(std::string_view raw, InputTensor& tensor);

// The inputs, decoded by any front end, to the native request (texts or ids).
// InvalidArgument says which input and what was wrong (name, datatype, shape).
// Every dimension is checked before anything is allocated for it: at least 1,
// and the rows (N) at most the model's max_client_batch_size (`batching`).
Status AssembleKServeRequest(const std::vector<InputTensor>& inputs,
                             const SchedulerOptions& batching, KServeRequest& request);

// JSON body; `binary` holds the bytes after the JSON header when the body used
// the binary tensor data extension (inputs with parameters.binary_data_size).
StatusOr<KServeRequest> DecodeKServeRequest(const nlohmann::json& body,
                                            const SchedulerOptions& batching,
                                            std::string_view binary = {});

// Checks the requested outputs against the model (NotFound-free: unknown
// names are InvalidArgument, as they are the client's mistake).
Status CheckRequestedOutputs(const KServeRequest& request, const serving::ServedModel& model);

// Encodes the texts or token ids, runs them (serving::Infer, whose timer
// the caller finishes once the answer is encoded) and returns the requested
// outputs.
StatusOr<std::vector<OutputTensor>> InferKServe(serving::Infer& infer, KServeRequest& request);

// The requested outputs of `result`. Per-token outputs are [N, S(, width)],
// zero where a row has no token; S is what the tokens run span (for ids, up
// to the last position run), never more than the model's max length.
std::vector<OutputTensor> SelectOutputs(const KServeRequest& request, const serving::ServedModel& model,
                                        const InferResult& result);

// The HTTP answer: a JSON object, or with binary outputs the JSON header
// followed by their bytes (header_length then set, for
// Inference-Header-Content-Length).
struct HttpAnswer {
  std::string body;
  size_t header_length = 0;  // 0: the body is plain JSON
};
HttpAnswer EncodeKServeResponse(const KServeRequest& request, const serving::ServedModel& model,
                                const std::vector<OutputTensor>& outputs);

// A load request's parameters (Triton's repository extension), each name with
// its string value where it has one: "config", the model's settings in
// Triton's JSON form, is returned ("" without it); "file:..." (model files sent
// in the request) and any other parameter are InvalidArgument, by name.
StatusOr<std::string> LoadConfigParameter(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& parameters);

// What a model takes and returns, for the metadata endpoints of both fronts.
struct TensorMetadata {
  std::string name, datatype;
  std::vector<int64_t> shape;
  bool optional = false;
};
std::vector<TensorMetadata> InputMetadata();
std::vector<TensorMetadata> OutputMetadata(const serving::ServedModel& model);

// GET /v2/models/{m}: name, versions, platform, inputs and outputs as served.
nlohmann::json ModelMetadata(const serving::ServedModel& model);

}  // namespace bertrt::server

// libFuzzer target for the KServe request decoder, the server's parser of
// untrusted bodies: a JSON header plus binary tensor data (the HTTP binary
// extension; gRPC's raw_input_contents go through the same DecodeRawTensor).
// Nothing may crash, hang or trip the sanitizers; bad input is a Status.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/common/kserve.h"

// Input: 2 bytes (little-endian) of JSON header length, the header, the binary data.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t header_len = std::min<size_t>(data[0] | (data[1] << 8), rest.size());
  const std::string_view header = rest.substr(0, header_len), binary = rest.substr(header_len);
  nlohmann::json body = nlohmann::json::parse(header.begin(), header.end(), nullptr, false);
  if (body.is_discarded()) return 0;
  const bertrt::SchedulerOptions batching;
  auto request = bertrt::server::DecodeKServeRequest(body, batching, binary);
  if (request.ok()) {
    // A decoded request is well formed: texts or rows, masks' positions per row.
    if (request->texts.empty() == request->sequences.empty()) __builtin_trap();
    if (request->positions.size() != request->sequences.size()) __builtin_trap();
    // Rows within the client batch limit, whatever the shape declared.
    if (request->texts.size() + request->sequences.size() > batching.client_batch_limit())
      __builtin_trap();
    for (size_t i = 0; i < request->sequences.size(); ++i)
      if (request->positions[i].size() != request->sequences[i].input_ids.size()) __builtin_trap();
  }
  return 0;
}

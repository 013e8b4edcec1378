// libFuzzer target: an ONNX model from arbitrary bytes (protobuf, then the
// graph walk that gives MatMul weights their names, int8 dequantization) must
// come back as a Status or as tensors whose every byte lies inside memory they
// own. External data is refused here (no directory).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "checkpoint/onnx_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto weights = bertrt::checkpoint::ParseOnnxModel(
      std::string_view(reinterpret_cast<const char*>(data), size), "", "fuzz");
  if (!weights.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const bertrt::checkpoint::CheckpointTensor& t : weights->tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data.raw());
    for (size_t i = 0; i < t.data.nbytes(); ++i) sink = sink ^ p[i];
  }
  return 0;
}

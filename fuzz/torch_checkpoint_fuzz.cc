// libFuzzer target: a pytorch_model.bin (zip or legacy format, each pickle
// read by the restricted unpickler) from arbitrary bytes must come back as a
// Status or as tensors whose every byte lies inside memory they own.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "checkpoint/torch_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A private copy: its exact size lets ASan flag any read past the end.
  auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(data), size);
  auto ckpt = bertrt::checkpoint::ParseTorchCheckpoint(*bytes, bytes, "fuzz");
  if (!ckpt.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const bertrt::checkpoint::CheckpointTensor& t : ckpt->tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data.raw());
    for (size_t i = 0; i < t.data.nbytes(); ++i) sink = sink ^ p[i];
  }
  return 0;
}

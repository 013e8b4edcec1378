// libFuzzer target: SafetensorsFile::Parse over arbitrary bytes must return a
// Status or a file whose every tensor view lies inside the input.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bertrt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A private copy: its exact size lets ASan flag any read past the end.
  auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(data), size);
  auto file = bertrt::SafetensorsFile::Parse(*bytes, bytes, "fuzz");
  if (!file.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const bertrt::SafetensorsEntry& e : file->entries()) {
    const bertrt::Tensor t = file->View(e);
    const auto* p = static_cast<const uint8_t*>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];
    if (file->Find(e.name) != &e) __builtin_trap();
  }
  for (const auto& [key, value] : file->metadata()) sink = sink ^ static_cast<uint8_t>(value.size());
  return 0;
}

// libFuzzer target for what the HTTP front end decodes from untrusted bytes
// before any handler runs: the request path's %XX escapes and gzip/deflate
// bodies (Content-Encoding), inflated under a limit. Nothing may crash, hang
// or trip the sanitizers, and the limit must hold.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/http/http_codec.h"

// Input: 1 byte choosing the limit (0..255 KB), then the bytes, taken both as
// a path and as a compressed body.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t limit = static_cast<size_t>(data[0]) << 10;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  // Decoding never lengthens a path.
  if (bertrt::server::PercentDecoded(bytes).size() > bytes.size()) __builtin_trap();
  auto body = bertrt::server::Inflate(bytes, limit);
  if (body.ok() && body->size() > limit) __builtin_trap();
  return 0;
}

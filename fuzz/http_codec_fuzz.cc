// libFuzzer target for what the HTTP front end decodes from untrusted bytes
// before any handler runs: the request path's %XX escapes, its route (the
// server's own patterns), and gzip/deflate bodies (Content-Encoding),
// inflated under a limit. Nothing may crash, hang or trip the sanitizers, and
// the limit must hold.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/http_codec.h"
#include "server/http/router.h"

namespace {

// The shapes of the server's route table: literals, parameters, a trailing
// slash, the root.
const bertrt::server::Router<int>& Routes() {
  static const auto* routes = [] {
    auto* r = new bertrt::server::Router<int>;
    int n = 0;
    for (const char* p : {"/", "/embed", "/v2/health/ready", "/v2/models/stats",
                          "/v2/models/{model}", "/v2/models/{model}/versions/{version}/infer",
                          "/models/{model}", "/models/{model}/", "/models/{model}/embed"}) {
      r->Add("GET", p, n++);
      r->Add("POST", p, n++);
    }
    return r;
  }();
  return *routes;
}

}  // namespace

// Input: 1 byte choosing the limit (0..255 KB), then the bytes, taken both as
// a path and as a compressed body.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t limit = static_cast<size_t>(data[0]) << 10;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  // Decoding never lengthens a path.
  const std::string path = bertrt::server::PercentDecoded(bytes);
  if (path.size() > bytes.size()) __builtin_trap();
  // A parameter's value is one whole segment of the path.
  const auto match = Routes().Find("GET", path);
  if (match.target && match.params["model"].find('/') != std::string::npos) __builtin_trap();
  auto body = bertrt::server::Inflate(bytes, limit);
  if (body.ok() && body->size() > limit) __builtin_trap();
  return 0;
}

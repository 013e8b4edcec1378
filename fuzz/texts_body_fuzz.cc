// libFuzzer target: ReadTextsBody (the embedding routes' tree-free read) over
// arbitrary bytes must not crash, and whatever it accepts the full parse
// (nlohmann, as every other body is read) must read the same: the same texts
// under "inputs", the same other fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "server/http/texts_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto fast = bertrt::server::ReadTextsBody(body, "inputs");
  if (!fast) return 0;
  nlohmann::json full = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (full.is_discarded() || !full.is_object() || !full.contains("inputs")) std::abort();
  const nlohmann::json& inputs = full["inputs"];
  const nlohmann::json want_texts = inputs.is_string() ? nlohmann::json::array({inputs}) : inputs;
  if (fast->batch != inputs.is_array() || nlohmann::json(fast->texts) != want_texts) std::abort();
  full.erase("inputs");
  if (fast->rest != full) std::abort();
  return 0;
}

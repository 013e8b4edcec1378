// libFuzzer target: ParseModelConfig over arbitrary text (a config.pbtxt) and
// ParseWarmupShape over the same bytes (a --warmup-shapes item) must return a
// Status or settings that hold the checks they promise.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/common/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto bad = [](const bertrt::serving::WarmupSample& w) {
    return w.batch_size <= 0 || w.length <= 0 || w.count <= 0 ||
           (w.is_range() && (w.up_to_batch_size < w.batch_size || w.up_to_length < w.length));
  };
  if (auto shape = bertrt::serving::ParseWarmupShape(text); shape.ok() && bad(*shape)) std::abort();
  auto config = bertrt::server::ParseModelConfig(text, "fuzz/config.pbtxt", "m");
  if (!config.ok()) return 0;
  if (config->max_batch_size && *config->max_batch_size <= 0) std::abort();
  for (const auto& g : config->instance_groups)
    if (g.count <= 0) std::abort();
  for (int size : config->preferred_batch_sizes)
    if (size <= 0) std::abort();
  for (const auto& w : config->warmups)
    if (bad(w) || (config->max_batch_size && w.batch_size > *config->max_batch_size)) std::abort();
  return 0;
}

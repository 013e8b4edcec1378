#include "model/relative_position.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace bertrt {

int RelativePositionBucket(int relative, int num_buckets) {
  constexpr int kMaxDistance = 128;  // MPNet's compute_position_bias default
  const int half = num_buckets / 2;
  int bucket = relative > 0 ? half : 0;  // keys after the query: the upper half
  const int n = std::abs(relative);
  const int max_exact = half / 2;
  if (n < max_exact) return bucket + n;
  // float32 throughout, as torch: log(n / max_exact) / log(128 / max_exact)
  // (a Python float, cast to float32) * (half - max_exact), truncated.
  const float ratio = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                      static_cast<float>(std::log(static_cast<double>(kMaxDistance) / max_exact));
  const int large = max_exact + static_cast<int>(ratio * static_cast<float>(half - max_exact));
  return bucket + std::min(large, half - 1);
}

std::vector<float> RelativePositionBiasTable(const ModelConfig& c, const ModelWeights& w) {
  if (c.relative_attention_buckets == 0 || w.relative_attention_bias.empty()) return {};
  const int span = c.max_positions(), width = 2 * span - 1, heads = c.num_heads;
  const float* bias = w.relative_attention_bias.f32();  // [buckets, heads]
  std::vector<float> table(static_cast<size_t>(heads) * width);
  for (int r = -(span - 1); r <= span - 1; ++r) {
    const int bucket = RelativePositionBucket(r, c.relative_attention_buckets);
    for (int h = 0; h < heads; ++h)
      table[static_cast<size_t>(h) * width + r + span - 1] = bias[bucket * heads + h];
  }
  return table;
}

}  // namespace bertrt

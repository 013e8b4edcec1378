#include "model/rotary.h"

#include <cmath>

namespace bertrt {

std::vector<float> RotaryTable(float theta, int head_dim, int positions) {
  const int half = head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i)
    inv_freq[i] =
        1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  std::vector<float> table(static_cast<size_t>(positions) * half * 2);
  for (int p = 0; p < positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      float* entry = table.data() + (static_cast<size_t>(p) * half + i) * 2;
      entry[0] = std::cos(angle);
      entry[1] = std::sin(angle);
    }
  }
  return table;
}

RotaryTables RotaryTablesFor(const ModelConfig& c) {
  RotaryTables tables;
  if (c.rope_theta <= 0.0f) return tables;
  tables.global = RotaryTable(c.rope_theta, c.head_dim(), c.max_positions());
  if (c.local_window > 0 && c.local_rope_theta != c.rope_theta)
    tables.local = RotaryTable(c.local_rope_theta, c.head_dim(), c.max_positions());
  return tables;
}

}  // namespace bertrt

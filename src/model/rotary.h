// Rotary position embedding tables (ModernBERT), shared by both engines so
// that they rotate by the same float32 angles transformers takes.
#pragma once

#include <vector>

#include "bertrt/model.h"

namespace bertrt {

// [positions][head_dim / 2][2]: (cos, sin) of the angle p * inv_freq[i] of
// pair i at position p, inv_freq[i] = 1 / theta^(2i / head_dim), the
// frequencies and the angle in float32 as transformers computes them (at
// position 8,191 the angle's float32 rounding is ~5e-4 rad: a table in double
// would disagree with the model's training by that much).
std::vector<float> RotaryTable(float theta, int head_dim, int positions);

// A model's rotary tables, both engines': its global layers', and its local
// layers' (ModernBERT's) where they have a theta of their own; empty where
// the model has no rotary positions (`local` empty: the global one serves).
struct RotaryTables {
  std::vector<float> global, local;
};
RotaryTables RotaryTablesFor(const ModelConfig& config);

}  // namespace bertrt

// The ranges a ModelConfig's numeric fields must lie in, described once: a
// plan's reader (builder/plan_layout.cc) holds the untrusted config it reads
// to them, and the model check (CheckModel) every model, whatever it was read
// from. The bounds keep every size product far from int64 overflow; the
// weights' shapes (checked against the schema) are what really bound memory.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::model {

// An int field in [lo, hi(config)]; hi may read the fields before it in
// IntBounds()'s order (num_heads at most hidden_size, say).
struct IntBound {
  const char* key;  // as config.json and a plan's metadata name it
  int ModelConfig::*field;
  int64_t lo;
  int64_t (*hi)(const ModelConfig&);
};

// A float field in range (`range` says which, e.g. "[0, 1]").
struct FloatBound {
  const char* key;
  float ModelConfig::*field;
  bool (*in_range)(double);
  const char* range;
};

const std::vector<IntBound>& IntBounds();
const std::vector<FloatBound>& FloatBounds();
// The bound of `key` (one of the tables' keys: a programming error otherwise).
const IntBound& IntBoundOf(std::string_view key);
const FloatBound& FloatBoundOf(std::string_view key);

// Every bound above, and what no one field decides (hidden_size divisible by
// num_heads); errors start with `context` ("model", "metadata").
Status CheckConfigBounds(const ModelConfig& c, std::string_view context);

}  // namespace bertrt::model

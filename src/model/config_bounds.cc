#include "model/config_bounds.h"

#include <cstdlib>
#include <string>

namespace bertrt::model {
namespace {

using C = ModelConfig;

template <int64_t kHi>
int64_t Fixed(const C&) {
  return kHi;
}

bool ThetaRange(double v) { return v >= 0 && v < 1e12; }

}  // namespace

const std::vector<IntBound>& IntBounds() {
  static const std::vector<IntBound> bounds = {
      {"vocab_size", &C::vocab_size, 1, Fixed<1 << 24>},
      {"hidden_size", &C::hidden_size, 1, Fixed<1 << 16>},
      {"num_layers", &C::num_layers, 1, Fixed<1024>},
      {"num_heads", &C::num_heads, 1, [](const C& c) { return int64_t{c.hidden_size}; }},
      {"intermediate_size", &C::intermediate_size, 1, Fixed<1 << 20>},
      {"max_position_embeddings", &C::max_position_embeddings, 1, Fixed<1 << 20>},
      {"type_vocab_size", &C::type_vocab_size, 1, Fixed<1 << 16>},
      {"pad_token_id", &C::pad_token_id, -(1 << 30), Fixed<1 << 30>},
      {"num_labels", &C::num_labels, 0, Fixed<1 << 20>},
      {"position_offset", &C::position_offset, 0,
       [](const C& c) { return int64_t{c.max_position_embeddings} - 1; }},
      {"relative_attention_buckets", &C::relative_attention_buckets, 0, Fixed<1 << 16>},
      {"local_window", &C::local_window, 0, Fixed<1 << 20>},
      {"global_attention_every", &C::global_attention_every, 1, Fixed<1 << 20>},
      {"max_seq_length", &C::max_seq_length, 1,
       [](const C& c) { return int64_t{c.max_positions()}; }},
      {"truncate_dim", &C::truncate_dim, 0,
       [](const C& c) { return int64_t{c.dense_output_width()}; }},
  };
  return bounds;
}

const std::vector<FloatBound>& FloatBounds() {
  static const std::vector<FloatBound> bounds = {
      {"rope_theta", &C::rope_theta, ThetaRange, "[0, 1e12)"},
      {"local_rope_theta", &C::local_rope_theta, ThetaRange, "[0, 1e12)"},
      {"layer_norm_eps", &C::layer_norm_eps, [](double v) { return v >= 0 && v <= 1; }, "[0, 1]"},
  };
  return bounds;
}

const IntBound& IntBoundOf(std::string_view key) {
  for (const IntBound& b : IntBounds())
    if (key == b.key) return b;
  std::abort();  // a key the table lacks: the caller's typo
}

const FloatBound& FloatBoundOf(std::string_view key) {
  for (const FloatBound& b : FloatBounds())
    if (key == b.key) return b;
  std::abort();
}

Status CheckConfigBounds(const ModelConfig& c, std::string_view context) {
  const std::string where(context);
  for (const IntBound& b : IntBounds()) {
    const int64_t v = c.*b.field, hi = b.hi(c);
    if (v < b.lo || v > hi)
      return InvalidArgument(where + ": " + b.key + " " + std::to_string(v) + " is outside [" +
                             std::to_string(b.lo) + ", " + std::to_string(hi) + "]");
  }
  for (const FloatBound& b : FloatBounds())
    if (!b.in_range(c.*b.field))
      return InvalidArgument(where + ": " + b.key + " " + std::to_string(c.*b.field) +
                             " is outside " + b.range);
  if (c.hidden_size % c.num_heads != 0)
    return InvalidArgument(where + ": hidden_size " + std::to_string(c.hidden_size) +
                           " is not divisible by num_heads " + std::to_string(c.num_heads));
  return Status::Ok();
}

}  // namespace bertrt::model

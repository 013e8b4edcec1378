// Floats in JSON as their shortest round-trip decimal (what `bertrt run`
// prints), not as the float widened to double with noise digits.
#pragma once

#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace bertrt::server {

inline nlohmann::json FloatJson(float value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf) - 1, value);
  *end = '\0';
  return ec == std::errc() ? nlohmann::json(std::strtod(buf, nullptr)) : nlohmann::json(value);
}

}  // namespace bertrt::server

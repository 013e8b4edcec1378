// Floats in JSON as their shortest round-trip decimal, not as the float
// widened to double with noise digits: what the CLI and the server print.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace bertrt {

inline nlohmann::json FloatJson(float value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf) - 1, value);
  *end = '\0';
  // The float's shortest form read as a double is the double whose own
  // shortest form has the same digits, which is what nlohmann prints.
  return ec == std::errc() ? nlohmann::json(std::strtod(buf, nullptr)) : nlohmann::json(value);
}

inline nlohmann::json FloatArray(const float* data, size_t n) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) a.push_back(FloatJson(data[i]));
  return a;
}

}  // namespace bertrt

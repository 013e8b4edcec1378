// Floats in JSON as their shortest round-trip decimal, not as the float
// widened to double with noise digits: what the CLI and the server print.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>

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

// The same array written straight as JSON text onto `out` (null for NaN and
// infinities, which JSON has not, as nlohmann writes them): one conversion
// per value instead of three and no tree, for answers of many floats.
inline void AppendJsonFloats(std::string& out, const float* data, size_t n) {
  out.push_back('[');
  char buf[32];
  for (size_t i = 0; i < n; ++i) {
    if (i) out.push_back(',');
    if (!std::isfinite(data[i])) {
      out += "null";
      continue;
    }
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), data[i]);
    out.append(buf, end);
  }
  out.push_back(']');
}

}  // namespace bertrt

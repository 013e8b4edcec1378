// JSON reading shared by the importer and the server. Every JSON file in a
// model directory is untrusted input, so parsing never throws and refuses
// pathological nesting.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "bertrt/status.h"

namespace bertrt {

// Deeper nesting than any model file needs; nlohmann's DOM construction and
// destruction recurse, so an unbounded depth is a stack overflow waiting to happen.
inline constexpr int kMaxJsonDepth = 64;

// Whether no array or object in `text` (JSON, or what claims to be) lies
// deeper than `limit` levels: a scan of its brackets outside string literals,
// cheap next to parsing, so that deep nesting is refused before anything
// recurses over it (the server's request bodies use it too).
bool JsonNestingWithin(std::string_view text, int limit);
// Parses `text`; `what` names the source in error messages.
StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& what);
// Reads (ReadRegularFile) and parses a file; NotFound if it does not exist.
StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// Typed field access that reports the file and key on a type mismatch.
// Absent (or null) fields give nullopt.
StatusOr<std::optional<int64_t>> GetInt(const nlohmann::json& obj, const char* key,
                                        const std::string& what);
StatusOr<std::optional<double>> GetNumber(const nlohmann::json& obj, const char* key,
                                          const std::string& what);
StatusOr<std::optional<std::string>> GetString(const nlohmann::json& obj, const char* key,
                                               const std::string& what);
StatusOr<std::optional<bool>> GetBool(const nlohmann::json& obj, const char* key,
                                      const std::string& what);

}  // namespace bertrt

#include "core/json_util.h"

#include "core/files.h"


namespace bertrt {

bool JsonNestingWithin(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& what) {
  if (!JsonNestingWithin(text, kMaxJsonDepth))
    return DataLoss(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                    " levels; refusing to parse it");
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(what + ": invalid JSON: " + e.what());
  }
}

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  return ParseJson(text, path);
}

namespace {

Status TypeError(const std::string& what, const char* key, const char* expected,
                 const nlohmann::json& value) {
  return InvalidArgument(what + ": \"" + key + "\" must be " + expected + ", found " +
                         value.dump().substr(0, 80));
}

const nlohmann::json* Field(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

StatusOr<std::optional<int64_t>> GetInt(const nlohmann::json& obj, const char* key,
                                        const std::string& what) {
  const nlohmann::json* v = Field(obj, key);
  if (!v) return std::optional<int64_t>();
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return TypeError(what, key, "an integer", *v);
    return std::optional<int64_t>(static_cast<int64_t>(u));
  }
  if (v->is_number_integer()) return std::optional<int64_t>(v->get<int64_t>());
  return TypeError(what, key, "an integer", *v);
}

StatusOr<std::optional<double>> GetNumber(const nlohmann::json& obj, const char* key,
                                          const std::string& what) {
  const nlohmann::json* v = Field(obj, key);
  if (!v) return std::optional<double>();
  if (!v->is_number()) return TypeError(what, key, "a number", *v);
  return std::optional<double>(v->get<double>());
}

StatusOr<std::optional<std::string>> GetString(const nlohmann::json& obj, const char* key,
                                               const std::string& what) {
  const nlohmann::json* v = Field(obj, key);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) return TypeError(what, key, "a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

StatusOr<std::optional<bool>> GetBool(const nlohmann::json& obj, const char* key,
                                      const std::string& what) {
  const nlohmann::json* v = Field(obj, key);
  if (!v) return std::optional<bool>();
  if (!v->is_boolean()) return TypeError(what, key, "true or false", *v);
  return std::optional<bool>(v->get<bool>());
}

}  // namespace bertrt

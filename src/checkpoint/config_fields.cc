#include "checkpoint/config_fields.h"

#include <filesystem>
#include <limits>

#include "core/files.h"
#include "core/json_util.h"

namespace bertrt::checkpoint {

StatusOr<HiddenAct> ParseActivation(const std::string& act, const std::string& path) {
  if (act == "gelu") return HiddenAct::kGelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
    return HiddenAct::kGeluTanh;
  if (act == "relu") return HiddenAct::kRelu;
  return Unimplemented(path + ": hidden_act \"" + act +
                       "\" is not supported (supported: gelu, gelu_new, gelu_pytorch_tanh, "
                       "gelu_fast, relu)");
}

Status ReadSize(const nlohmann::json& j, const char* key, int64_t fallback, int64_t min,
                const std::string& path, int* out) {
  ASSIGN_OR_RETURN(std::optional<int64_t> v, GetInt(j, key, path));
  const int64_t value = v.value_or(fallback);
  if (value < min || value > std::numeric_limits<int32_t>::max())
    return InvalidArgument(path + ": \"" + key + "\" = " + std::to_string(value) +
                           " is out of range (must be at least " + std::to_string(min) + ")");
  *out = static_cast<int>(value);
  return Status::Ok();
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (name.empty()) return dir;
  return (std::filesystem::path(dir) / name).string();
}

StatusOr<std::vector<std::string>> ReadLabelsFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path));
  std::vector<std::string> names;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) names.push_back(std::move(line));
    start = end + 1;
  }
  return names;
}

}  // namespace bertrt::checkpoint

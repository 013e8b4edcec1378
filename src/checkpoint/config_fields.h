// What config files and checkpoints share below the importer and the model
// families: notices, paths, a config's sizes and activation names, label
// files.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt::checkpoint {

using NoticeFn = std::function<void(const std::string&)>;

// Class names, one per line (blank lines and a trailing \r skipped): a
// labels.txt beside a TensorFlow checkpoint, a --labels file.
StatusOr<std::vector<std::string>> ReadLabelsFile(const std::string& path);

// For the families' config mappings: `key` as a size of at least `min`,
// `fallback` when absent (the family's config class default, as transformers
// applies it).
Status ReadSize(const nlohmann::json& j, const char* key, int64_t fallback, int64_t min,
                const std::string& path, int* out);
// An HF activation name (hidden_act, DistilBERT's activation).
StatusOr<HiddenAct> ParseActivation(const std::string& act, const std::string& path);

// dir/name (`dir` alone when name is empty).
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace bertrt::checkpoint

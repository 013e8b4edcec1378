// A model's serving settings: the command line's defaults, overridden by an
// optional DIR/<model>/config.pbtxt in Triton's text format. Parsed with
// protobuf's TextFormat into the messages of proto/model_config.proto, then
// checked and turned into plain structs, so nothing else sees protobuf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bertrt/status.h"

namespace bertrt::server {

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int num_versions = 1;           // kLatest
  std::vector<int64_t> versions;  // kSpecific
};

struct InstanceGroup {
  enum class Kind { kAuto, kGpu, kCpu };
  Kind kind = Kind::kAuto;
  int count = 1;
  std::vector<int> gpus;  // kGpu: empty means every visible GPU
};

// Everything config.pbtxt may set; unset fields keep the command line's value.
struct ModelConfigFile {
  std::optional<int> max_batch_size;
  std::optional<int64_t> max_queue_delay_us;
  std::vector<int> preferred_batch_sizes;
  std::optional<int> max_queue_size;
  std::optional<int64_t> request_timeout_us;
  std::vector<InstanceGroup> instance_groups;
  std::optional<VersionPolicy> version_policy;
  std::optional<std::string> precision;
  std::optional<int> max_batch_tokens;
  std::optional<int> threads;
  std::optional<std::string> gelu;  // "tanh" | "exact": the command line's --gelu
};

// Parses config.pbtxt text. `path` and `model_name` go into the messages:
// syntax errors name the line and column; unknown fields, bad values and a
// `name` other than the model's directory are InvalidArgument.
StatusOr<ModelConfigFile> ParseModelConfig(const std::string& text, const std::string& path,
                                           const std::string& model_name);

// Reads DIR/config.pbtxt when present (an empty ModelConfigFile otherwise).
StatusOr<ModelConfigFile> LoadModelConfig(const std::string& model_dir,
                                          const std::string& model_name);

}  // namespace bertrt::server

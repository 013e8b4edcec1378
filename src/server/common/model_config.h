// A model's config.pbtxt in Triton's text format (or its JSON form, as a
// load request carries it): parsed with protobuf's TextFormat into the
// messages of proto/model_config.proto (all of Triton's fields), then checked
// and turned into the serving core's ModelConfigFile, so nothing else sees
// protobuf. What bertrt has no use for (another engine's platform,
// optimization or parameters...) is listed in `ignored`, not refused.
#pragma once

#include <string>

#include "bertrt/status.h"
#include "serving/model_settings.h"

namespace bertrt::server {

using serving::ModelConfigFile;

// Parses config.pbtxt text. `path` and `model_name` go into the messages:
// syntax errors name the line and column; fields that are not Triton's, bad
// values, a `name` other than the model's directory and ensembles are
// InvalidArgument.
StatusOr<ModelConfigFile> ParseModelConfig(const std::string& text, const std::string& path,
                                           const std::string& model_name);

// The same settings in Triton's JSON form (what a load request's
// parameters.config carries, tritonclient's load_model(config=...)); `what`
// names the source in messages.
StatusOr<ModelConfigFile> ParseModelConfigJson(const std::string& text, const std::string& what,
                                               const std::string& model_name);

// Reads DIR/config.pbtxt when present (an empty ModelConfigFile otherwise).
StatusOr<ModelConfigFile> LoadModelConfig(const std::string& model_dir,
                                          const std::string& model_name);

}  // namespace bertrt::server

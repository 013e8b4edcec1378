// Triton's model configuration for a served model: the input and output
// blocks of a config.pbtxt checked against what the model takes and returns,
// and the configuration the model configuration extension answers with
// (GET /v2/models/{m}[/versions/{v}]/config, gRPC ModelConfig): the settings
// the model is served with, in Triton's ModelConfig.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bertrt/status.h"
#include "server/common/model_config.h"
#include "serving/served_model.h"

namespace bertrt::config {
class ModelConfig;
}

namespace bertrt::server {

// InvalidArgument, naming the file, the block and the field, when an input or
// output block of `config` disagrees with the model: a name it does not
// take or return, a data_type other than its, dims of another rank or with a
// fixed size other than its (sequence lengths: 1 to `max_seq_length`).
// `outputs`: what the model returns (ServedModel::outputs()).
Status CheckTensorBlocks(const ModelConfigFile& config, int max_seq_length,
                         const std::vector<OutputDescription>& outputs);

// How the model registry reads a repository's config.pbtxt (and a load
// request's JSON config) and checks its blocks: Triton's way, above.
serving::ModelConfigSource TritonConfigSource();

// The served model's configuration in Triton's message: name, platform and
// backend "bertrt", max_batch_size, input and output blocks (the config's
// own when it has them, else the model's), dynamic_batching, instance_group,
// version_policy and bertrt's parameters, all as they are in effect.
void FillModelConfig(const serving::ServedModel& model, config::ModelConfig& out);

// The same as JSON, as Triton writes it (field names as in the proto, every
// scalar field present, 64-bit integers as numbers).
StatusOr<nlohmann::json> ModelConfigJson(const serving::ServedModel& model);

}  // namespace bertrt::server

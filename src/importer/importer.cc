#include "bertrt/importer.h"

#include <filesystem>
#include <optional>

#include "importer/checkpoint.h"
#include "importer/hf_config.h"
#include "importer/json_util.h"
#include "importer/tf_checkpoint.h"
#include "importer/weight_mapping.h"

namespace bertrt {

namespace {

namespace fs = std::filesystem;

Status CheckDirectory(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) return NotFound(dir + ": no such directory");
  if (!fs::is_directory(st))
    return InvalidArgument(dir + ": expected a Hugging Face model directory, found a file");
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<Model>> LoadHfModel(const std::string& dir,
                                             const ImportOptions& options) {
  RETURN_IF_ERROR(CheckDirectory(dir));
  ASSIGN_OR_RETURN(auto layout, importer::ReadSentenceTransformersLayout(dir));
  const std::string model_dir = layout ? layout->transformer_dir : dir;

  std::string config_path = importer::JoinPath(model_dir, "config.json");
  const std::string bert_config_path = importer::JoinPath(model_dir, "bert_config.json");
  nlohmann::json config_json;
  std::optional<importer::Checkpoint> ckpt;
  if (fs::exists(config_path)) {
    ASSIGN_OR_RETURN(config_json, importer::ReadJsonFile(config_path));
  } else if (fs::exists(bert_config_path)) {
    // A folder as Google's BERT scripts leave it: the head and labels come
    // from the checkpoint's variables.
    ASSIGN_OR_RETURN(ckpt, importer::Checkpoint::Open(model_dir));
    ASSIGN_OR_RETURN(nlohmann::json bert_config, importer::ReadJsonFile(bert_config_path));
    ASSIGN_OR_RETURN(config_json, importer::HfConfigFromBertConfig(bert_config, bert_config_path,
                                                                   *ckpt, options.on_notice));
    config_path = bert_config_path;
  } else {
    return NotFound(model_dir + ": no config.json (nor the bert_config.json of a TensorFlow BERT "
                    "checkpoint); is this a Hugging Face model directory?");
  }
  auto model = std::make_shared<Model>();
  ASSIGN_OR_RETURN(model->config,
                   importer::ParseModelConfig(config_json, config_path, options.on_notice));
  if (layout)
    RETURN_IF_ERROR(
        importer::ApplySentenceTransformers(*layout, options.on_notice, &model->config));

  if (!ckpt) {
    ASSIGN_OR_RETURN(ckpt, importer::Checkpoint::Open(model_dir));
  }
  RETURN_IF_ERROR(
      importer::BindWeights(*ckpt, model->config, options.on_notice, &model->weights));
  if (layout)
    for (const auto& [dense_dir, spec] : layout->dense)
      RETURN_IF_ERROR(importer::BindDenseWeights(dense_dir, spec, options.on_notice,
                                                 &model->weights.dense.emplace_back()));
  model->source = dir;
  model->weights_format = ckpt->format();
  return model;
}

}  // namespace bertrt

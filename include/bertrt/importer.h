// Loads a Hugging Face model directory (BERT family, any head, or a
// sentence-transformers directory) into a bertrt Model.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"

namespace bertrt {

struct ImportOptions {
  // Called with human-readable notices (skipped training-only tensors, ...).
  std::function<void(const std::string&)> on_notice;
};

// Reads config.json (+ modules.json, 1_Pooling/config.json,
// sentence_bert_config.json) and model.safetensors (or its sharded index).
StatusOr<std::shared_ptr<Model>> LoadHfModel(const std::string& dir,
                                             const ImportOptions& options = {});

// A model plus its tokenizer: what every command needs.
struct LoadedModel {
  std::shared_ptr<Model> model;
  std::shared_ptr<Tokenizer> tokenizer;
};

StatusOr<LoadedModel> LoadModelAndTokenizer(const std::string& path,
                                            const ImportOptions& options = {});

}  // namespace bertrt

// Loads a Hugging Face model directory (BERT family, any head, or a
// sentence-transformers directory) into a bertrt Model.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"

namespace bertrt {

struct ImportOptions {
  // Called with human-readable notices (skipped training-only tensors, ...).
  std::function<void(const std::string&)> on_notice;
  // --tokenizer: the directory whose tokenizer to use instead of the model's
  // own (a bare model.onnx, a checkpoint folder without its vocab.txt).
  std::string tokenizer_dir;
  // --labels: the classifier's class names in order, replacing config.json's
  // (a TensorFlow checkpoint has none): a file with one per line, or a
  // comma-separated list.
  std::string labels;
};

// What a MODEL argument names: a model directory, or a weights file in one
// (a .onnx file; a TensorFlow checkpoint by its prefix model.ckpt-N, its
// .index or a data shard), whose directory holds the config and tokenizer.
struct ModelSource {
  std::string dir;
  std::string weights;  // the weights file or TensorFlow prefix; empty: found in `dir`
};
StatusOr<ModelSource> ResolveModelSource(const std::string& path);

// Reads a model directory (or a weights file in one, see ModelSource):
// config.json (+ modules.json, 1_Pooling/config.json,
// sentence_bert_config.json; or a TensorFlow folder's bert_config.json; or
// what an ONNX graph implies) and the weights (src/checkpoint/checkpoint.h).
StatusOr<std::shared_ptr<Model>> LoadHfModel(const std::string& path,
                                             const ImportOptions& options = {});

// A model plus its tokenizer: what every command needs, from a model
// directory (as above) or a plan file (src/builder/ defines it).
struct LoadedModel {
  std::shared_ptr<Model> model;
  std::shared_ptr<Tokenizer> tokenizer;
  std::string tokenizer_dir;  // where the tokenizer was read from; empty for a plan
};

StatusOr<LoadedModel> LoadModelAndTokenizer(const std::string& path,
                                            const ImportOptions& options = {});

}  // namespace bertrt

// Kept apart from importer.cc so that code needing only the model does not
// pull the tokenizer into its link.
#include <filesystem>

#include "bertrt/importer.h"
#include "importer/hf_config.h"

namespace bertrt {

namespace {

namespace fs = std::filesystem;

// Where a sentence-transformers directory keeps its transformer (config,
// weights, tokenizer); the directory itself otherwise.
StatusOr<std::string> TransformerDir(const std::string& dir) {
  ASSIGN_OR_RETURN(auto layout, importer::ReadSentenceTransformersLayout(dir));
  return layout ? layout->transformer_dir : dir;
}

}  // namespace

StatusOr<LoadedModel> LoadModelAndTokenizer(const std::string& path,
                                            const ImportOptions& options) {
  LoadedModel loaded;
  ASSIGN_OR_RETURN(loaded.model, LoadHfModel(path, options));
  // sentence-transformers writes the tokenizer next to the transformer module,
  // which is usually the directory itself.
  std::string tokenizer_dir = path;
  if (!fs::exists(importer::JoinPath(path, "tokenizer.json")) &&
      !fs::exists(importer::JoinPath(path, "vocab.txt"))) {
    ASSIGN_OR_RETURN(tokenizer_dir, TransformerDir(path));
  }
  ASSIGN_OR_RETURN(loaded.tokenizer, Tokenizer::FromDirectory(tokenizer_dir));
  const int vocab = static_cast<int>(loaded.tokenizer->vocab_size());
  if (vocab > loaded.model->config.vocab_size)
    return InvalidArgument(path + ": the tokenizer has " + std::to_string(vocab) +
                           " tokens but the model's vocab_size is " +
                           std::to_string(loaded.model->config.vocab_size) +
                           "; ids past the embedding table would be out of range");
  return loaded;
}

}  // namespace bertrt

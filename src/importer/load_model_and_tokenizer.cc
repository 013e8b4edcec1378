// Kept apart from importer.cc so that code needing only the model does not
// pull the tokenizer into its link.
#include "bertrt/importer.h"
#include "bertrt/plan.h"

namespace bertrt {

StatusOr<LoadedModel> LoadModelAndTokenizer(const std::string& path,
                                            const ImportOptions& options) {
  LoadedModel loaded;
  // A plan file carries its own tokenizer; everything else is an HF directory.
  if (IsPlanFile(path)) {
    ASSIGN_OR_RETURN(Plan plan, ReadPlan(path));
    loaded.model = std::move(plan.model);
    loaded.tokenizer = std::move(plan.tokenizer);
    return loaded;
  }
  ASSIGN_OR_RETURN(loaded.model, LoadHfModel(path, options));
  // sentence-transformers writes the tokenizer next to the transformer module,
  // which is usually the directory itself.
  ASSIGN_OR_RETURN(std::string tokenizer_dir, TokenizerDirectory(path));
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

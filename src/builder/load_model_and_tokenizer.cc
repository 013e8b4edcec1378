// Declared with the importer (bertrt/importer.h), defined here with the plan
// reader: it takes a plan file as well as a model directory, and the builder
// is the layer above both (the importer calls nothing of the builder's).
// Kept apart from the plan reader so that code needing only plans does not
// pull the tokenizer directory reading into its link.
#include "bertrt/importer.h"
#include "bertrt/plan.h"
#include "importer/hf_config.h"

namespace bertrt {

StatusOr<LoadedModel> LoadModelAndTokenizer(const std::string& path,
                                            const ImportOptions& options) {
  LoadedModel loaded;
  // A plan file carries its own tokenizer; everything else is a model
  // directory or a weights file in one.
  if (const std::string plan_path = PlanPath(path); !plan_path.empty()) {
    if (!options.tokenizer_dir.empty())
      return InvalidArgument("--tokenizer " + options.tokenizer_dir + ": " + path +
                             " is a plan, which carries its own tokenizer; give --tokenizer "
                             "to `bertrt build` instead");
    ASSIGN_OR_RETURN(Plan plan, ReadPlan(plan_path));
    loaded.model = std::move(plan.model);
    loaded.tokenizer = std::move(plan.tokenizer);
  } else {
    ASSIGN_OR_RETURN(loaded.model, LoadHfModel(path, options));
    // sentence-transformers writes the tokenizer next to the transformer
    // module, which is usually the directory itself.
    std::string dir = options.tokenizer_dir;
    if (dir.empty()) {
      ASSIGN_OR_RETURN(const ModelSource source, ResolveModelSource(path));
      dir = source.dir;
    }
    ASSIGN_OR_RETURN(loaded.tokenizer_dir, TokenizerDirectory(dir));
    auto tokenizer = Tokenizer::FromDirectory(loaded.tokenizer_dir);
    if (!tokenizer.ok() && options.tokenizer_dir.empty())
      return Status(tokenizer.status().code(),
                    tokenizer.status().message() +
                        " (a model whose folder has no tokenizer takes one from --tokenizer DIR)");
    ASSIGN_OR_RETURN(loaded.tokenizer, std::move(tokenizer));
    const int vocab = static_cast<int>(loaded.tokenizer->vocab_size());
    if (vocab > loaded.model->config.vocab_size)
      return InvalidArgument(path + ": the tokenizer (" + loaded.tokenizer_dir + ") has " +
                             std::to_string(vocab) + " tokens but the model's vocab_size is " +
                             std::to_string(loaded.model->config.vocab_size) +
                             "; ids past the embedding table would be out of range");
  }
  if (!options.labels.empty()) {
    Model& model = *loaded.model;
    RETURN_IF_ERROR(importer::ApplyLabels(options.labels, &model.config, [&](const std::string& n) {
      model.import_notes.push_back(n);
      if (options.on_notice) options.on_notice(n);
    }));
  }
  return loaded;
}

}  // namespace bertrt

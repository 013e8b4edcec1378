#include "bertrt/importer.h"

#include <filesystem>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "importer/hf_config.h"
#include "core/json_util.h"
#include "checkpoint/tf_checkpoint.h"
#include "importer/weight_mapping.h"

namespace bertrt {

namespace {

namespace fs = std::filesystem;

bool IsOnnxFile(const std::string& path) { return fs::path(path).extension() == ".onnx"; }

std::string ParentDirectory(const fs::path& p) {
  const fs::path parent = p.parent_path();
  return parent.empty() ? "." : parent.string();
}

// config.json's content and the file it came from: config.json, Google's
// bert_config.json (with the checkpoint's head), or an ONNX graph.
struct ConfigSource {
  nlohmann::json json;
  std::string path;
  bool from_graph = false;
};

StatusOr<ConfigSource> ReadConfig(const std::string& model_dir, const ModelSource& source,
                                  std::optional<checkpoint::Checkpoint>* ckpt,
                                  const checkpoint::NoticeFn& notice) {
  ConfigSource c;
  c.path = checkpoint::JoinPath(model_dir, "config.json");
  const std::string bert_config_path = checkpoint::JoinPath(model_dir, "bert_config.json");
  if (fs::exists(c.path)) {
    ASSIGN_OR_RETURN(c.json, ReadJsonFile(c.path));
    return c;
  }
  if (fs::exists(bert_config_path)) {
    // A folder as Google's BERT scripts leave it: the head and labels come
    // from the checkpoint's variables.
    ASSIGN_OR_RETURN(*ckpt, checkpoint::Checkpoint::Open(model_dir, source.weights));
    ASSIGN_OR_RETURN(nlohmann::json bert_config, ReadJsonFile(bert_config_path));
    ASSIGN_OR_RETURN(c.json, checkpoint::HfConfigFromBertConfig(bert_config, bert_config_path,
                                                              **ckpt, notice));
    c.path = bert_config_path;
    return c;
  }
  if (IsOnnxFile(source.weights) || (source.weights.empty() &&
                                     fs::exists(checkpoint::JoinPath(model_dir, "model.onnx")))) {
    ASSIGN_OR_RETURN(*ckpt, checkpoint::Checkpoint::Open(model_dir, source.weights));
    const checkpoint::ImpliedConfig& implied = (*ckpt)->implied_config();
    if (implied.config.is_null())
      return NotFound(model_dir + ": no config.json, and the ONNX graph does not tell the "
                      "config: " + implied.gap + "; put the model's config.json beside it");
    if (notice)
      notice("inferred: no config.json, so the config is the ONNX graph's: " + implied.derivation +
             " (--labels names the classes; a config.json beside it sets anything else)");
    c.json = implied.config;
    c.path = (*ckpt)->files().front();
    c.from_graph = true;
    return c;
  }
  return NotFound(model_dir + ": no config.json (nor the bert_config.json of a TensorFlow BERT "
                  "checkpoint); is this a Hugging Face model directory?");
}

// An ONNX export's graph against the config.json beside it: a head count the
// graph does not compute would give wrong outputs without an error.
Status CheckAgainstGraph(const checkpoint::Checkpoint& ckpt, const ModelConfig& config,
                         const std::string& config_path, const checkpoint::NoticeFn& notice) {
  const checkpoint::ImpliedConfig& implied = ckpt.implied_config();
  if (implied.config.is_null()) return Status::Ok();
  auto graph = importer::ParseModelConfig(implied.config, ckpt.files().front(), nullptr);
  if (!graph.ok()) return Status::Ok();  // a family the graph's config does not describe
  if (graph->num_heads != config.num_heads)
    return InvalidArgument(config_path + ": " + std::to_string(config.num_heads) +
                           " attention heads, but " + ckpt.files().front() +
                           " splits Q, K and V into " + std::to_string(graph->num_heads) +
                           " heads of width " + std::to_string(graph->head_dim()) +
                           "; is this config.json the exported model's?");
  if (graph->hidden_act != config.hidden_act && notice)
    notice(config_path + ": hidden_act is " + HiddenActName(config.hidden_act) + ", but " +
           ckpt.files().front() + " computes " + HiddenActName(graph->hidden_act) +
           "; running config.json's");
  return Status::Ok();
}

}  // namespace

StatusOr<ModelSource> ResolveModelSource(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) return ModelSource{path, ""};
  const fs::path p(path);
  if (fs::is_regular_file(st) && IsOnnxFile(path)) return ModelSource{ParentDirectory(p), path};
  // A TensorFlow checkpoint named by its prefix (model.ckpt-1000), its index
  // or one of its data shards.
  std::string prefix = path;
  const std::string name = p.filename().string();
  if (p.extension() == ".index") {
    prefix = path.substr(0, path.size() - 6);
  } else if (const size_t data = name.rfind(".data-"); data != std::string::npos) {
    prefix = (p.parent_path() / name.substr(0, data)).string();
  }
  if (fs::is_regular_file(prefix + ".index", ec)) return ModelSource{ParentDirectory(p), prefix};
  if (!fs::exists(st)) {
    // "org/name": a Hugging Face Hub id, which bertrt does not download.
    const size_t slash = path.find('/');
    const bool hub_id = slash != std::string::npos && slash > 0 && slash + 1 < path.size() &&
                        path.find('/', slash + 1) == std::string::npos && path[0] != '.';
    return NotFound(path + ": no such file or directory" +
                    (hub_id ? std::string("; bertrt reads local files only: download the model first "
                                          "(`hf download ") + path + " --local-dir models/" +
                                  path.substr(slash + 1) + "`, huggingface_hub's CLI) and give that folder"
                            : std::string()));
  }
  // A file of a model's folder (config.json, model.safetensors): the folder is the model.
  const fs::path folder = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const bool in_model_folder = fs::is_regular_file(folder / "config.json", ec) ||
                               fs::is_regular_file(folder / "tokenizer.json", ec) ||
                               fs::is_regular_file(folder / "vocab.txt", ec);
  return InvalidArgument(path + " is a file, not a model: expected a Hugging Face model folder, a " +
                         "plan file, a .onnx file or a TensorFlow checkpoint (model.ckpt-N)" +
                         (in_model_folder ? "; give the folder that holds it, " + folder.string()
                                          : std::string()));
}

StatusOr<std::shared_ptr<Model>> LoadHfModel(const std::string& path,
                                             const ImportOptions& options) {
  ASSIGN_OR_RETURN(const ModelSource source, ResolveModelSource(path));
  auto model = std::make_shared<Model>();
  // Every notice is also kept with the model, for `inspect` and the plan.
  const checkpoint::NoticeFn notice = [&](const std::string& n) {
    model->import_notes.push_back(n);
    if (options.on_notice) options.on_notice(n);
  };
  ASSIGN_OR_RETURN(auto layout, importer::ReadSentenceTransformersLayout(source.dir));
  const std::string model_dir = layout ? layout->transformer_dir : source.dir;

  std::optional<checkpoint::Checkpoint> ckpt;
  ASSIGN_OR_RETURN(const ConfigSource config, ReadConfig(model_dir, source, &ckpt, notice));
  ASSIGN_OR_RETURN(model->config, importer::ParseModelConfig(config.json, config.path, notice));
  if (layout)
    RETURN_IF_ERROR(importer::ApplySentenceTransformers(*layout, notice, &model->config));
  if (model->config.head == HeadKind::kSparseEmbedding)
    notice(config.path + ": " + model->config.architecture +
           " served as SPLADE sparse embeddings (/embed_sparse): log(1 + relu) of the "
           "masked-LM logits, the max over the tokens (or as a sentence-transformers "
           "SpladePooling module says)");

  if (!ckpt) {
    ASSIGN_OR_RETURN(ckpt, checkpoint::Checkpoint::Open(model_dir, source.weights));
  }
  for (const std::string& n : ckpt->notes()) notice(n);
  if (!config.from_graph) RETURN_IF_ERROR(CheckAgainstGraph(*ckpt, model->config, config.path, notice));
  RETURN_IF_ERROR(importer::BindWeights(*ckpt, model->config, notice, &model->weights));
  if (layout)
    for (const auto& [dense_dir, spec] : layout->dense)
      RETURN_IF_ERROR(importer::BindDenseWeights(dense_dir, spec, notice,
                                                 &model->weights.dense.emplace_back()));
  model->source = path;
  model->weights_format = ckpt->format();
  model->weights_files = ckpt->files();
  return model;
}

}  // namespace bertrt

#include "checkpoint/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <functional>
#include <set>

#include "bertrt/safetensors.h"
#include "checkpoint/config_fields.h"
#include "core/json_util.h"
#include "checkpoint/onnx_model.h"
#include "checkpoint/tf_checkpoint.h"
#include "checkpoint/torch_checkpoint.h"

namespace bertrt::checkpoint {

namespace {

namespace fs = std::filesystem;

// One weights file read into tensors; `variants` gets the file's variant of
// the format where it has several (torch.save's "zip" and "legacy").
using FileReader = std::function<Status(const std::string& path, std::vector<CheckpointTensor>*,
                                        std::set<std::string>* variants)>;

Status ReadSafetensors(const std::string& path, std::vector<CheckpointTensor>* out,
                       std::set<std::string>*) {
  ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
  const std::string file = fs::path(path).filename().string();
  for (const SafetensorsEntry& e : f.entries()) out->push_back({e.name, f.View(e), file});
  return Status::Ok();
}

Status ReadTorch(const std::string& path, std::vector<CheckpointTensor>* out,
                 std::set<std::string>* variants) {
  ASSIGN_OR_RETURN(TorchCheckpoint ckpt, ReadTorchCheckpoint(path));
  for (CheckpointTensor& t : ckpt.tensors) out->push_back(std::move(t));
  variants->insert(ckpt.format);
  return Status::Ok();
}

// Weights bertrt cannot read, and what to do with them.
Status UnsupportedFormatError(const std::string& dir) {
  static const char* const kOther[] = {"tf_model.h5", "flax_model.msgpack"};
  std::string found;
  for (const char* name : kOther)
    if (fs::exists(JoinPath(dir, name))) {
      found = name;
      break;
    }
  if (found.empty())
    return NotFound(dir + ": no model.safetensors, model.safetensors.index.json, "
                    "pytorch_model.bin, pytorch_model.bin.index.json, model.onnx or TensorFlow "
                    "checkpoint (model.ckpt*.index); is this a Hugging Face model directory?");
  const bool tf = found != "flax_model.msgpack";
  // Loading through the class named in config.json keeps the task head.
  return NotFound(
      dir + ": has " + found + " but no weights in a format bertrt reads (safetensors, "
      "pytorch_model.bin, ONNX, a TensorFlow 1 checkpoint). Convert it once (needs torch and transformers):\n  python -c \"import sys, "
      "transformers as t; d = sys.argv[1]; a = t.AutoConfig.from_pretrained(d).architectures[0]; "
      "getattr(t, a).from_pretrained(d" + std::string(tf ? ", from_tf=True" : "") +
      ").save_pretrained(d, safe_serialization=True)\" " + dir);
}

// Shards listed by an index file (model.safetensors.index.json or
// pytorch_model.bin.index.json), each read by `read`.
Status ReadSharded(const std::string& dir, const std::string& index_path, const FileReader& read,
                   std::vector<CheckpointTensor>* out, std::set<std::string>* variants,
                   std::vector<std::string>* files) {
  ASSIGN_OR_RETURN(nlohmann::json index, ReadJsonFile(index_path));
  auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object())
    return DataLoss(index_path + ": no \"weight_map\" object");
  std::map<std::string, std::string> wanted;  // tensor -> shard
  std::set<std::string> shards;
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string())
      return DataLoss(index_path + ": weight_map[\"" + name + "\"] is not a file name");
    const std::string file = shard.get<std::string>();
    // Shard names come from an untrusted file; they must stay in this directory.
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      return DataLoss(index_path + ": shard name \"" + file + "\" is not a plain file name");
    wanted[name] = file;
    shards.insert(file);
  }
  files->push_back(index_path);
  for (const std::string& shard : shards) {
    files->push_back(JoinPath(dir, shard));
    RETURN_IF_ERROR(read(files->back(), out, variants));
  }
  std::map<std::string, std::string> where;
  for (const CheckpointTensor& t : *out) where.emplace(t.name, t.file);
  for (const auto& [name, shard] : wanted) {
    auto it = where.find(name);
    if (it == where.end() || it->second != shard)
      return DataLoss(index_path + ": says tensor \"" + name + "\" is in " + shard +
                      ", but it is not there");
  }
  return Status::Ok();
}

// An ONNX export's weights, named as transformers named them.
StatusOr<Checkpoint> OpenOnnx(const std::string& path) {
  ASSIGN_OR_RETURN(OnnxWeights w, ReadOnnxModel(path));
  std::string format = "ONNX (" + fs::path(path).filename().string();
  if (w.dequantized) format += ", " + std::to_string(w.dequantized) + " int8 tensors dequantized";
  ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Of(std::move(w.tensors), format + ")"));
  ckpt.set_files(std::move(w.files));
  ckpt.set_implied_config(std::move(w.config));
  if (w.named_by_bias)
    ckpt.add_note("mapped: " + std::to_string(w.named_by_bias) +
                  " MatMul/Gemm weights named after the bias added to their output, "
                  "transposed from [in, out]");
  return ckpt;
}

StatusOr<Checkpoint> OpenTf(const std::string& prefix) {
  ASSIGN_OR_RETURN(TfCheckpoint tf, ReadTfCheckpoint(prefix));
  ASSIGN_OR_RETURN(Checkpoint ckpt,
                   Checkpoint::Of(std::move(tf.tensors), "TensorFlow checkpoint (" +
                                                             fs::path(prefix).filename().string() + ")"));
  ckpt.set_files(std::move(tf.files));
  ckpt.add_note("mapped: " + std::to_string(tf.renamed) +
                " variables from Google BERT's names to transformers' (" +
                std::to_string(tf.transposed) + " kernels transposed from [in, out])");
  return ckpt;
}

}  // namespace

StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir, const std::string& weights) {
  if (!weights.empty())
    return fs::path(weights).extension() == ".onnx" ? OpenOnnx(weights) : OpenTf(weights);
  // In the order transformers prefers them.
  struct Layout {
    const char* format;
    const char* single;
    const char* index;
    FileReader read;
  };
  const Layout layouts[] = {
      {"safetensors", "model.safetensors", "model.safetensors.index.json", ReadSafetensors},
      {"pytorch_model.bin", "pytorch_model.bin", "pytorch_model.bin.index.json", ReadTorch}};
  for (const Layout& l : layouts) {
    std::vector<CheckpointTensor> tensors;
    std::set<std::string> variants;
    std::vector<std::string> files;
    const std::string single = JoinPath(dir, l.single), index = JoinPath(dir, l.index);
    if (fs::exists(single)) {
      files.push_back(single);
      RETURN_IF_ERROR(l.read(single, &tensors, &variants));
    } else if (fs::exists(index)) {
      RETURN_IF_ERROR(ReadSharded(dir, index, l.read, &tensors, &variants, &files));
    } else {
      continue;
    }
    // "safetensors", "pytorch_model.bin (zip)", "pytorch_model.bin (legacy, zip), 3 shards"
    std::string format = l.format, joined;
    for (const std::string& v : variants) joined += (joined.empty() ? "" : ", ") + v;
    if (!joined.empty()) format += " (" + joined + ")";
    if (files.size() > 1) format += ", " + std::to_string(files.size() - 1) + " shards";
    ASSIGN_OR_RETURN(Checkpoint ckpt, Of(std::move(tensors), std::move(format)));
    ckpt.set_files(std::move(files));
    return ckpt;
  }
  const std::string onnx = JoinPath(dir, "model.onnx");
  if (fs::exists(onnx)) return OpenOnnx(onnx);
  ASSIGN_OR_RETURN(const std::string tf_prefix, FindTfCheckpoint(dir));
  if (!tf_prefix.empty()) return OpenTf(tf_prefix);
  return UnsupportedFormatError(dir);
}

Tensor TransposeMatrix(const Tensor& m) {
  const size_t es = DTypeSize(m.dtype());
  const int64_t rows = m.dim(0), cols = m.dim(1);
  const auto* src = static_cast<const char*>(m.raw());
  auto t = std::make_shared<std::string>(m.nbytes(), '\0');
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(t->data() + (c * rows + r) * es, src + (r * cols + c) * es, es);
  return Tensor(m.dtype(), {cols, rows}, t->data(), t);
}

StatusOr<Checkpoint> Checkpoint::Of(std::vector<CheckpointTensor> tensors, std::string format) {
  Checkpoint ckpt;
  ckpt.format_ = std::move(format);
  RETURN_IF_ERROR(ckpt.Add(std::move(tensors)));
  return ckpt;
}

Status Checkpoint::Add(std::vector<CheckpointTensor> tensors) {
  for (CheckpointTensor& t : tensors) {
    const std::string name = t.name;
    const std::string file = t.file;
    auto [it, inserted] = tensors_.emplace(name, std::move(t));
    if (!inserted)
      return DataLoss("tensor \"" + name + "\" is in both " + it->second.file + " and " + file);
  }
  return Status::Ok();
}

const CheckpointTensor* Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace bertrt::checkpoint

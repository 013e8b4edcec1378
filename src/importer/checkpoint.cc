#include "importer/checkpoint.h"

#include <filesystem>
#include <set>

#include "importer/hf_config.h"
#include "importer/json_util.h"

namespace bertrt::importer {

namespace {

namespace fs = std::filesystem;

// Weights bertrt cannot read, and what to do with them.
Status UnsupportedFormatError(const std::string& dir) {
  static const char* const kOther[] = {"pytorch_model.bin", "pytorch_model.bin.index.json",
                                       "tf_model.h5", "model.ckpt.index", "flax_model.msgpack"};
  std::string found;
  for (const char* name : kOther) {
    if (fs::exists(JoinPath(dir, name))) {
      found = name;
      break;
    }
  }
  if (found.empty())
    return NotFound(dir + ": no model.safetensors or model.safetensors.index.json; is this a "
                    "Hugging Face model directory?");
  const bool tf = found == "tf_model.h5" || found == "model.ckpt.index";
  // Loading through the class named in config.json keeps the task head.
  return NotFound(
      dir + ": has " + found + " but no model.safetensors; bertrt reads only safetensors. "
      "Convert it once (needs torch and transformers):\n  python -c \"import sys, transformers "
      "as t; d = sys.argv[1]; a = t.AutoConfig.from_pretrained(d).architectures[0]; "
      "getattr(t, a).from_pretrained(d" + std::string(tf ? ", from_tf=True" : "") +
      ").save_pretrained(d, safe_serialization=True)\" " + dir);
}

}  // namespace

StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  Checkpoint ckpt;
  const std::string single = JoinPath(dir, "model.safetensors");
  if (fs::exists(single)) {
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(single));
    RETURN_IF_ERROR(ckpt.Add(std::make_unique<SafetensorsFile>(std::move(f))));
    return ckpt;
  }
  const std::string index_path = JoinPath(dir, "model.safetensors.index.json");
  if (!fs::exists(index_path)) return UnsupportedFormatError(dir);

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
  for (const std::string& shard : shards) {
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(JoinPath(dir, shard)));
    RETURN_IF_ERROR(ckpt.Add(std::make_unique<SafetensorsFile>(std::move(f))));
  }
  for (const auto& [name, shard] : wanted) {
    const Ref* ref = ckpt.Find(name);
    if (!ref || fs::path(ref->file->path()).filename() != shard)
      return DataLoss(index_path + ": says tensor \"" + name + "\" is in " + shard +
                      ", but it is not there");
  }
  return ckpt;
}

Status Checkpoint::Add(std::unique_ptr<SafetensorsFile> file) {
  for (const SafetensorsEntry& e : file->entries()) {
    auto [it, inserted] = tensors_.emplace(e.name, Ref{file.get(), &e});
    if (!inserted)
      return DataLoss("tensor \"" + e.name + "\" is in both " + FileName(it->second) +
                      " and " + fs::path(file->path()).filename().string());
  }
  files_.push_back(std::move(file));
  return Status::Ok();
}

const Checkpoint::Ref* Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::string Checkpoint::FileName(const Ref& ref) {
  return fs::path(ref.file->path()).filename().string();
}

}  // namespace bertrt::importer

// The tensors of a checkpoint, whether one model.safetensors or shards listed
// in model.safetensors.index.json, looked up by name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bertrt/safetensors.h"
#include "bertrt/status.h"

namespace bertrt::importer {

class Checkpoint {
 public:
  struct Ref {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
  };

  // Opens the checkpoint in `dir`. A directory holding only PyTorch or
  // TensorFlow weights gets an error that says how to convert them.
  static StatusOr<Checkpoint> Open(const std::string& dir);

  const Ref* Find(const std::string& name) const;
  const std::map<std::string, Ref>& tensors() const { return tensors_; }
  // The file name (without directory) that holds `ref`, for messages.
  static std::string FileName(const Ref& ref);

 private:
  Status Add(std::unique_ptr<SafetensorsFile> file);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;  // stable addresses for Ref
  std::map<std::string, Ref> tensors_;
};

}  // namespace bertrt::importer

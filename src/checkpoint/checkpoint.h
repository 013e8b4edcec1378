// The tensors of a checkpoint, looked up by name, whatever format holds them:
// model.safetensors or its shards (model.safetensors.index.json),
// pytorch_model.bin in torch's zip or legacy format or its shards
// (pytorch_model.bin.index.json), an ONNX export, a TensorFlow 1 checkpoint.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertrt/status.h"
#include "bertrt/tensor.h"

namespace bertrt::checkpoint {

// One tensor as a checkpoint file holds it: its bytes (any dtype, row-major,
// contiguous), kept alive by the tensor's owner.
struct CheckpointTensor {
  std::string name;
  Tensor data;
  std::string file;  // the file name (without directory) that holds it, for messages
};

// A matrix of any dtype as a new one, transposed: [rows, cols] -> [cols,
// rows] (TensorFlow's and ONNX's [in, out] kernels to transformers' [out, in]).
Tensor TransposeMatrix(const Tensor& m);

// config.json's content as a weights file implies it (an ONNX graph: see
// onnx_model.h), for folders that have none and to check those that do.
struct ImpliedConfig {
  nlohmann::json config;   // null: none
  std::string gap;         // why there is none, where the format could tell
  std::string derivation;  // how it was told, for the "inferred" notice
};

class Checkpoint {
 public:
  // Opens the checkpoint in `dir`, or the one `weights` names (a .onnx file,
  // a TensorFlow checkpoint prefix). A directory holding only weights bertrt
  // does not read gets an error that names them and says how to convert them.
  static StatusOr<Checkpoint> Open(const std::string& dir, const std::string& weights = "");
  // A checkpoint of `tensors` (tests, and the readers of other formats).
  static StatusOr<Checkpoint> Of(std::vector<CheckpointTensor> tensors, std::string format);

  const CheckpointTensor* Find(const std::string& name) const;
  const std::map<std::string, CheckpointTensor>& tensors() const { return tensors_; }
  // What it was read from, for `inspect` and notices: "safetensors",
  // "pytorch_model.bin (zip)", "pytorch_model.bin (legacy)".
  const std::string& format() const { return format_; }
  // The files read (paths), for the plan's source checksum.
  const std::vector<std::string>& files() const { return files_; }
  // What the reader did to give tensors transformers' names ("mapped ..."),
  // for `inspect`.
  const std::vector<std::string>& notes() const { return notes_; }
  const ImpliedConfig& implied_config() const { return implied_config_; }
  // For the readers of each format.
  void set_files(std::vector<std::string> files) { files_ = std::move(files); }
  void add_note(std::string note) { notes_.push_back(std::move(note)); }
  void set_implied_config(ImpliedConfig c) { implied_config_ = std::move(c); }

 private:
  Status Add(std::vector<CheckpointTensor> tensors);

  std::map<std::string, CheckpointTensor> tensors_;
  std::string format_;
  std::vector<std::string> files_;
  std::vector<std::string> notes_;
  ImpliedConfig implied_config_;
};

}  // namespace bertrt::checkpoint

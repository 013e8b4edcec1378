// The tensors of a checkpoint, looked up by name, whatever format holds them:
// model.safetensors or its shards (model.safetensors.index.json),
// pytorch_model.bin in torch's zip or legacy format or its shards
// (pytorch_model.bin.index.json).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bertrt/status.h"
#include "bertrt/tensor.h"

namespace bertrt::importer {

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

class Checkpoint {
 public:
  // Opens the checkpoint in `dir`. A directory holding only weights bertrt
  // does not read gets an error that names them and says how to convert them.
  static StatusOr<Checkpoint> Open(const std::string& dir);
  // A checkpoint of `tensors` (tests, and the readers of other formats).
  static StatusOr<Checkpoint> Of(std::vector<CheckpointTensor> tensors, std::string format);

  const CheckpointTensor* Find(const std::string& name) const;
  const std::map<std::string, CheckpointTensor>& tensors() const { return tensors_; }
  // What it was read from, for `inspect` and notices: "safetensors",
  // "pytorch_model.bin (zip)", "pytorch_model.bin (legacy)".
  const std::string& format() const { return format_; }

 private:
  Status Add(std::vector<CheckpointTensor> tensors);

  std::map<std::string, CheckpointTensor> tensors_;
  std::string format_;
};

}  // namespace bertrt::importer

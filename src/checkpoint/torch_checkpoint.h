// Reads a state dict that torch.save wrote (pytorch_model.bin and its shards)
// without Python: the zip format of PyTorch 1.6 and later (a data.pkl and one
// record per storage) and the legacy format before it (pickles, then each
// storage's bytes). The pickle is read by the restricted reader of
// torch_pickle.h, which runs nothing; every storage, offset, size and stride
// is checked against the bytes there before a tensor views them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/status.h"
#include "checkpoint/checkpoint.h"

namespace bertrt::checkpoint {

struct TorchCheckpoint {
  std::vector<CheckpointTensor> tensors;
  std::string format;  // "zip" or "legacy"
};

// Reads the file at `path`: a zip straight from the file (each storage read
// once, into memory of its own), a legacy file into memory that its tensors
// then view.
StatusOr<TorchCheckpoint> ReadTorchCheckpoint(const std::string& path);

// The same from bytes in memory (the fuzz target, tests); `owner` keeps
// `bytes` alive for tensors that view them.
StatusOr<TorchCheckpoint> ParseTorchCheckpoint(std::string_view bytes,
                                               std::shared_ptr<const void> owner,
                                               const std::string& display_name);

}  // namespace bertrt::checkpoint

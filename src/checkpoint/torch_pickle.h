// A restricted reader of the pickle that torch.save writes for a state dict
// (data.pkl inside a pytorch_model.bin, or the main pickle of the legacy
// format). It is not Python's unpickler: it executes nothing. It knows the
// opcodes of pickle protocols 2 to 5 that build plain data (ints, floats,
// strings, tuples, lists, dicts) and exactly the globals a state dict names:
// collections.OrderedDict, torch._utils' tensor and parameter rebuilders and
// the torch.*Storage types. Any other global (os.system, builtins.eval,
// a tensor subclass...) is refused by name before anything else is read,
// as are the opcodes that instantiate classes (INST, OBJ, NEWOBJ, EXT*).
//
// What it returns is a recipe per tensor: the storage it views (resolved by
// the container format: a zip record or a legacy file's storage section),
// the offset, size and stride that torch._utils._rebuild_tensor_v2 would get.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/status.h"
#include "bertrt/tensor.h"

namespace bertrt::checkpoint {

// A storage as a persistent id names it: ('storage', torch.FloatStorage,
// key, location, numel[, view metadata]).
struct TorchStorageRef {
  std::string key;
  DType dtype = DType::kF32;
  int64_t numel = 0;  // elements of `dtype`
};

// One tensor of the state dict: a strided view of a storage.
struct TorchTensorRecipe {
  std::string name;
  TorchStorageRef storage;
  int64_t offset = 0;  // in elements
  std::vector<int64_t> size, stride;
};

// What a pickle returned, read into a state dict. `storages` lists every
// storage the pickle named, in the order it first named them.
struct TorchStateDict {
  std::vector<TorchTensorRecipe> tensors;
  std::vector<TorchStorageRef> storages;
};

// Reads `bytes` (one pickle, up to its STOP) as a state dict: a dict (or
// OrderedDict) of name -> tensor, or such a dict under "state_dict",
// "model" or "module" (as training scripts wrap it). `consumed` receives how
// many bytes the pickle took (the legacy format puts more after it).
// `where` names the file in messages.
StatusOr<TorchStateDict> ReadTorchStateDictPickle(std::string_view bytes, const std::string& where,
                                                  size_t* consumed = nullptr);

// Reads one pickle of plain data that the legacy format writes around the
// state dict (its magic number, protocol version, system info, storage
// keys), as a small JSON-like value.
struct PickleScalar {
  enum class Kind { kNone, kBool, kInt, kBigInt, kFloat, kString, kList, kDict } kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;  // kString; kBigInt: its little-endian two's-complement bytes
  std::vector<PickleScalar> items;  // kList (tuples too)
  // kDict, as two lists (a pair of this type is not complete inside it).
  std::vector<PickleScalar> keys, values;
};
StatusOr<PickleScalar> ReadPlainPickle(std::string_view bytes, const std::string& where,
                                       size_t* consumed);

}  // namespace bertrt::checkpoint

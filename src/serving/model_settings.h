// A model's serving settings beyond the command line's: what Triton's
// config.pbtxt may set (version policy, instance groups, batching, warm-up,
// input and output blocks), as plain structs. The server reads them from the
// file with protobuf (server/common/model_config.h) and hands the serving
// core a ModelConfigSource, so that nothing here sees protobuf.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bertrt/head_outputs.h"
#include "bertrt/status.h"

namespace bertrt::serving {

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int num_versions = 1;           // kLatest
  std::vector<int64_t> versions;  // kSpecific
};

struct InstanceGroup {
  enum class Kind { kAuto, kGpu, kCpu };
  Kind kind = Kind::kAuto;
  int count = 1;
  std::vector<int> gpus;  // kGpu: empty means every visible GPU
};

// A model_warmup entry: `count` batches of `batch_size` sequences of
// `length` tokens (ids 0, or random ids of the vocabulary), run on every
// instance when the model loads, before it is ready. On a GPU this captures
// the CUDA graphs of those batch shapes, so that the first requests of that
// shape do not pay for it (the first half-load step after a saturation sweep
// had a p99 of 25 ms on the H200 against ~2.4 ms once its shapes were met).
struct WarmupSample {
  std::string name;
  int batch_size = 1;
  int length = 0;
  bool random_ids = false;
  int count = 1;
  // A range (--warmup-shapes 1-32x100-192): every batch_size..up_to_batch_size
  // sequences of length..up_to_length tokens that stays within the scheduler's
  // max batch size and tokens, each distinct shape an instance runs as once.
  int up_to_batch_size = 0;  // 0: batch_size alone
  int up_to_length = 0;      // 0: length alone
  bool is_range() const { return up_to_batch_size > 0 || up_to_length > 0; }
};

// A warm-up sample written "BATCHxLENGTH" (`bertrt serve --warmup-shapes 8x128`):
// BATCH sequences of LENGTH tokens, ids 0, once; either number may be a range
// MIN-MAX ("1-32x100-192").
StatusOr<WarmupSample> ParseWarmupShape(const std::string& text);

// An input or output block of config.pbtxt, as written; checked against the
// model once it is loaded (CheckTensorBlocks, triton_config.h).
struct TensorBlock {
  std::string name;
  std::string data_type;      // "TYPE_INT64", ...
  std::vector<int64_t> dims;  // without the batch dimension when max_batch_size > 0
  bool optional = false;      // inputs
  bool has_reshape = false;
  std::vector<int64_t> reshape;
};

// Everything config.pbtxt may set; unset fields keep the command line's value.
struct ModelConfigFile {
  std::string path;  // the file, for messages (empty: no file)
  std::optional<int> max_batch_size;
  std::optional<int64_t> max_queue_delay_us;
  std::vector<int> preferred_batch_sizes;
  std::optional<int> max_queue_size;
  std::optional<int64_t> request_timeout_us;
  std::vector<InstanceGroup> instance_groups;
  std::optional<VersionPolicy> version_policy;
  std::optional<std::string> precision;
  std::optional<int> max_batch_tokens;
  std::optional<int> threads;
  std::optional<std::string> gelu;  // "tanh" | "exact": the command line's --gelu
  std::vector<WarmupSample> warmups;
  // Given, these must agree with the model; dims leave the batch dimension
  // out when max_batch_size is set (> 0), as Triton's do.
  std::vector<TensorBlock> inputs, outputs;
  // What the file sets that bertrt does not use, one line each ("optimization
  // (...)"), for the server to log once per load.
  std::vector<std::string> ignored;
};

// How the model registry reads and checks a model's settings (the server's
// config.pbtxt reader gives these; without them a repository's models get the
// command line's settings alone).
struct ModelConfigSource {
  // DIR/config.pbtxt of a model directory (an empty ModelConfigFile without one).
  std::function<StatusOr<ModelConfigFile>(const std::string& model_dir,
                                          const std::string& model_name)>
      read;
  // The settings a load request carries (Triton's JSON form); `what` names it in messages.
  std::function<StatusOr<ModelConfigFile>(const std::string& text, const std::string& what,
                                          const std::string& model_name)>
      parse_json;
  // InvalidArgument when the config's input or output blocks disagree with
  // the model (its max sequence length and outputs).
  std::function<Status(const ModelConfigFile& config, int max_seq_length,
                       const std::vector<OutputDescription>& outputs)>
      check_blocks;
};

}  // namespace bertrt::serving

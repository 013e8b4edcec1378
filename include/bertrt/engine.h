// The runtime boundary: a ragged batch of token ids in, named outputs out. The
// engine never sees text, JSON or protobuf; the callers never see kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt {

// Sequences packed back to back, no padding. Sequence i owns tokens
// [cu_seqlens[i], cu_seqlens[i+1]).
struct RaggedBatch {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;
  std::vector<int32_t> cu_seqlens{0};
  // Per sequence: the first token a sentence embedding pools (>0 leaves out
  // a prompt's tokens: ModelConfig::include_prompt false); less than its length.
  std::vector<int32_t> pool_start;
  int max_len = 0;

  int num_seqs() const { return static_cast<int>(cu_seqlens.size()) - 1; }
  int num_tokens() const { return cu_seqlens.back(); }
  void Add(const std::vector<int32_t>& ids, const std::vector<int32_t>& type_ids,
           int32_t pool_start = 0);
};

// One output tensor. Per-sequence outputs are [num_seqs, width]; per-token
// outputs are ragged [num_tokens, width], split by the batch's cu_seqlens.
struct NamedOutput {
  std::string name;  // as DescribeOutputs (bertrt/head_outputs.h) names and lays it out
  bool per_token = false;
  int width = 0;
  std::vector<float> data;
};

struct RunOptions {
  // Also return last_hidden_state (per token, hidden_size wide).
  bool last_hidden_state = false;
};

struct BatchOutputs {
  std::vector<NamedOutput> outputs;
  const NamedOutput* Find(const std::string& name) const;
};

// GPU time of one kind of operation, summed over the batches an engine ran
// with profiling on (CudaEngineOptions::profile).
struct OpProfile {
  std::string name;  // "gemm ffn_in", "attention", "layernorm", ...
  long calls = 0;
  double seconds = 0;
  double flops = 0;  // GEMMs and attention; 0 for the rest
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) = 0;
  virtual const ModelConfig& config() const = 0;
  virtual std::string device() const = 0;
  // Highest memory the engine's own buffers reached (weights excluded).
  virtual size_t PeakMemoryBytes() const = 0;
  // Per-operation times, when the engine was created to profile; else empty.
  virtual std::vector<OpProfile> Profile() const { return {}; }
  // Blocks until the work an engine does off the request path (the CUDA
  // engine's graph captures) is done, so that the next Run of a shape seen
  // before takes the steady-state path: for benchmarks and tests.
  virtual void WaitForBackgroundWork() {}
  // What a batch runs as, for warm-up: batches with equal keys run the same
  // prepared program (the CUDA engine's padded shape and its graph), so
  // warming one warms them all. By default every batch's own dimensions.
  virtual std::string ShapeKey(const RaggedBatch& batch, const RunOptions& options) const;
  // How many prepared shapes the engine keeps (least recently used ones are
  // dropped past it); 0: no limit.
  virtual size_t KeptShapes() const { return 0; }
};

// Checks ids against the vocabulary, type ids (of a model that takes them)
// against type_vocab_size and each length against the positions the model
// has (max_positions), before any compute.
Status ValidateBatch(const RaggedBatch& batch, const ModelConfig& config);

struct CpuEngineOptions {
  int threads = 0;  // 0: all cores
  // Where the engine's notices go (nullptr: nowhere): it computes in fp32
  // and says so when it widens a plan's fp16/bf16 weights.
  std::function<void(const std::string&)> on_notice;
};

StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(std::shared_ptr<const Model> model,
                                                  const CpuEngineOptions& options);

}  // namespace bertrt

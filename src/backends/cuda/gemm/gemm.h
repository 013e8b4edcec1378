// Linear layers through cuBLASLt: one handle and workspace per engine, and a
// plan (matmul descriptor, layouts, algorithm) cached per shape, so a steady
// stream of batches does no cuBLASLt set-up work.
//
// A shape's algorithm comes from the process-wide cache of timed choices when
// it holds one for this GPU, cuBLASLt version, precision, shape and epilogue
// (a plan's choices are added to it; cuBLASLt checks each before use). Else it
// is the heuristic's first answer, or with time_gemms, the fastest of up to
// kTunedCandidates of the heuristic's answers, run on the call's own
// operands at the shape's first call outside graph capture; the result joins
// the cache, so engines on identical GPUs share it and compute the same bits.
// On the H200 a plan's timed choices make BERT-base batch 32 and 128 1-1.5%
// faster, batch 1 and 8 no faster, and the ragged 32 x 16..128 batch 1.7%
// slower (bench/RESULTS.md, 2026-11-30): a GEMM timed alone is not a GEMM in
// the forward. Timing at first use runs on the request path, so it is off by
// default; `bertrt build --device cuda` times the shapes once and stores the
// choices in the plan.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/gemm/cublaslt_api.h"
#include "backends/cuda/gemm/epilogue.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// The cuBLASLt workspace of the engine's GEMMs and of the builder's timing.
inline constexpr size_t kGemmWorkspaceBytes = 32 << 20;

class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();

  // `gpu_name` keys the shared cache of timed choices.
  Status Init(Precision precision, size_t workspace_bytes, const std::string& gpu_name,
              bool time_gemms);

  // y[rows, out] = act(x[rows, in] W^T + bias [+ residual[rows, out]]), W is
  // [out, in] row-major (HF's layout), all in the engine's precision; fp32
  // accumulation (plain fp32, no TF32, for the fp32 engine).
  // Thread-safe: an engine calls it from its request thread and, while
  // capturing a CUDA graph, from its capture thread.
  Status Linear(const void* x, int rows, int in, const void* w, const void* bias, int out,
                Epilogue epilogue, const void* residual, void* y, cudaStream_t stream);
  // The same on FP8 tensor cores (sm_89 and newer): x and W in E4M3 (x
  // quantized by QuantizeToE4M3, W by the plan), y = act(scale * (x W^T) +
  // bias [+ residual]) with fp32 accumulation, `scale` the product of x's
  // and W's scales; bias, residual and y in the engine's precision (fp16 or
  // bf16). `in` and `out` multiples of 16 (Fp8GemmTakes).
  Status LinearFp8(const void* x, int rows, int in, const void* w, float scale, const void* bias,
                   int out, Epilogue epilogue, const void* residual, void* y,
                   cudaStream_t stream);

  size_t workspace_bytes() const { return workspace_bytes_; }
  // Shapes timed by this engine, and shapes whose choice came from the cache.
  int tuned_shapes() const { return tuned_shapes_; }
  int cached_shapes() const { return cached_shapes_; }

  static constexpr int kTunedCandidates = 8;

 private:
  struct Key {
    int m, n, k;
    Epilogue epilogue;
    bool fp8 = false;  // E4M3 operands (LinearFp8)
    auto operator<=>(const Key&) const = default;
  };
  // Linear's and LinearFp8's call once the key is made.
  Status Run(const Key& key, const void* x, const void* w, float alpha, const void* bias,
             const void* residual, void* y, cudaStream_t stream);
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    std::vector<cublasLtMatmulAlgo_t> candidates;  // until tuned
    bool tuned = false;
  };
  StatusOr<Plan*> GetPlan(const Key& key, const void* bias);
  // The matmul descriptor and matrix layouts of `key`.
  Status MakeDescriptors(const Key& key, const void* bias, Plan* plan) const;
  // The heuristic's answers for `key`: plan->algo and plan->candidates.
  Status AskHeuristic(const Key& key, Plan* plan) const;
  void DestroyPlan(Plan& plan) const;
  // Times the candidates on these operands and keeps the fastest.
  Status Tune(const Key& key, Plan& plan, const void* x, const void* w, const void* c, void* y,
              float beta, cudaStream_t stream);
  std::string CacheKey(const Key& key) const;
  // The cached choice for `key`, when there is one and cuBLASLt accepts it.
  bool CachedChoice(const Key& key, Plan* plan) const;

  Precision precision_ = Precision::kFp16;
  const CublasLtApi* lt_ = nullptr;  // set by Init
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::mutex mu_;  // Linear: the plans, and a plan's bias pointer until its call is made
  std::map<Key, Plan> plans_;
  std::string key_prefix_;  // GemmChoicePrefix of this engine
  bool tuning_ = false;
  int tuned_shapes_ = 0, cached_shapes_ = 0;
};

// "<gpu name>|cublasLt <version>|<precision>|": the part of a GemmChoice's
// name that says where it applies.
StatusOr<std::string> GemmChoicePrefix(const std::string& gpu_name, Precision precision);
// Adds choices (a plan's) to the process-wide cache; InvalidArgument when an
// algorithm is not 128 hex digits.
Status AddGemmChoices(const std::vector<GemmChoice>& choices);
// The cached choices whose names start with `prefix`.
std::vector<GemmChoice> GemmChoicesWithPrefix(const std::string& prefix);

}  // namespace bertrt::cuda

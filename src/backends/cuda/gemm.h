// Linear layers through cuBLASLt: one handle and workspace per engine, and a
// plan (matmul descriptor, layouts, heuristic's algorithm) cached per shape,
// so a steady stream of batches does no cuBLASLt set-up work.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <map>

#include "bertrt/cuda_engine.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// What the GEMM's epilogue applies after adding the bias.
enum class Epilogue { kBias, kBiasGeluTanh, kBiasRelu };

class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();

  Status Init(Precision precision, size_t workspace_bytes);

  // y[rows, out] = act(x[rows, in] W^T + bias [+ residual[rows, out]]), W is
  // [out, in] row-major (HF's layout), all in the engine's precision; fp32
  // accumulation (plain fp32, no TF32, for the fp32 engine).
  Status Linear(const void* x, int rows, int in, const void* w, const void* bias, int out,
                Epilogue epilogue, const void* residual, void* y, cudaStream_t stream);

  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  struct Key {
    int m, n, k;
    Epilogue epilogue;
    auto operator<=>(const Key&) const = default;
  };
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  StatusOr<const Plan*> GetPlan(const Key& key, const void* bias);
  Status BuildPlan(const Key& key, const void* bias, Plan* plan) const;
  static void DestroyPlan(Plan& plan);

  Precision precision_ = Precision::kFp16;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
};

}  // namespace bertrt::cuda

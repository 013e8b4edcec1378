#include "backends/cuda/gemm.h"

#include <string>

#include "backends/cuda/cuda_check.h"

namespace bertrt::cuda {
namespace {

cudaDataType_t DataType(Precision p) {
  switch (p) {
    case Precision::kFp32: return CUDA_R_32F;
    case Precision::kFp16: return CUDA_R_16F;
    case Precision::kBf16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t LtEpilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kBiasGeluTanh: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::kBiasRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_BIAS;
}

template <typename V>
Status SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
  return Status::Ok();
}

}  // namespace

void LtGemm::DestroyPlan(Plan& plan) {
  if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
  if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
}

LtGemm::~LtGemm() {
  for (auto& [key, plan] : plans_) DestroyPlan(plan);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

Status LtGemm::Init(Precision precision, size_t workspace_bytes) {
  precision_ = precision;
  CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle_));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&workspace_, workspace_bytes));
  workspace_bytes_ = workspace_bytes;
  return Status::Ok();
}

StatusOr<const LtGemm::Plan*> LtGemm::GetPlan(const Key& key, const void* bias) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  Plan plan;
  const Status st = BuildPlan(key, bias, &plan);
  if (!st.ok()) {
    DestroyPlan(plan);
    return st;
  }
  return &plans_.emplace(key, plan).first->second;
}

// Row-major y[n, m] = x[n, k] W^T is, read column-major, D[m, n] = W'[k, m]^T x'[k, n]:
// A = W with transa = T, B = x with transb = N, D with leading dimension m.
Status LtGemm::BuildPlan(const Key& key, const void* bias, Plan* p) const {
  const cudaDataType_t dt = DataType(precision_);
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  RETURN_IF_ERROR(SetDesc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  RETURN_IF_ERROR(SetDesc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  RETURN_IF_ERROR(SetDesc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, LtEpilogue(key.epilogue)));
  RETURN_IF_ERROR(SetDesc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p->a, dt, key.k, key.m, key.k));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p->b, dt, key.k, key.n, key.k));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p->c, dt, key.m, key.n, key.m));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                        &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  const std::string shape = "[" + std::to_string(key.n) + ", " + std::to_string(key.k) +
                            "] x [" + std::to_string(key.m) + ", " + std::to_string(key.k) +
                            "]^T in " + PrecisionName(precision_);
  if (st != CUBLAS_STATUS_SUCCESS)
    return CublasStatus(st, ("algorithm heuristic for " + shape).c_str());
  if (found == 0) return Unimplemented("cuBLASLt has no algorithm for the linear layer " + shape);
  p->algo = result.algo;
  return Status::Ok();
}

Status LtGemm::Linear(const void* x, int rows, int in, const void* w, const void* bias, int out,
                      Epilogue epilogue, const void* residual, void* y, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  ASSIGN_OR_RETURN(const Plan* plan, GetPlan({out, rows, in, epilogue}, bias));
  RETURN_IF_ERROR(SetDesc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
  const float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
  // With beta = 0, C is not read; D stands in for it.
  const void* c = residual ? residual : y;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, plan->desc, &alpha, w, plan->a, x, plan->b,
                                        &beta, c, plan->c, y, plan->c, &plan->algo, workspace_,
                                        workspace_bytes_, stream));
  return Status::Ok();
}

}  // namespace bertrt::cuda

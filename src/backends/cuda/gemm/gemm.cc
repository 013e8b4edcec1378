#include "backends/cuda/gemm/gemm.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/cuda/gemm/cublaslt_api.h"
#include "backends/cuda/util/cuda_check.h"

namespace bertrt::cuda {
namespace {

cudaDataType_t DataType(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return CUDA_R_32F;
    case Precision::kFp16:
      return CUDA_R_16F;
    case Precision::kBf16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t LtEpilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kBiasGeluTanh:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::kBiasRelu:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::kBiasGelu:  // refused by Linear
      break;
  }
  return CUBLASLT_EPILOGUE_BIAS;
}

template <typename V>
Status SetDesc(const CublasLtApi& lt, cublasLtMatmulDesc_t desc,
               cublasLtMatmulDescAttributes_t attr, const V& value) {
  CUBLAS_RETURN_IF_ERROR(lt.MatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
  return Status::Ok();
}

// The timed choices of every engine in this process and of the plans it
// loaded, by GemmChoice name.
struct TuningCache {
  std::mutex mu;
  std::unordered_map<std::string, cublasLtMatmulAlgo_t> algos;
};
TuningCache& SharedTuningCache() {
  static TuningCache cache;
  return cache;
}

// Destroys a CUDA event when it leaves scope.
struct Event {
  cudaEvent_t e = nullptr;
  ~Event() {
    if (e) cudaEventDestroy(e);
  }
};

}  // namespace

void LtGemm::DestroyPlan(Plan& plan) const {
  if (plan.a) lt_->MatrixLayoutDestroy(plan.a);
  if (plan.b) lt_->MatrixLayoutDestroy(plan.b);
  if (plan.c) lt_->MatrixLayoutDestroy(plan.c);
  if (plan.desc) lt_->MatmulDescDestroy(plan.desc);
}

LtGemm::~LtGemm() {
  if (!lt_) return;  // never initialized: nothing was created
  for (auto& [key, plan] : plans_) DestroyPlan(plan);
  if (workspace_) cudaFree(workspace_);
  if (handle_) lt_->Destroy(handle_);
}

Status LtGemm::Init(Precision precision, size_t workspace_bytes, const std::string& gpu_name,
                    bool time_gemms) {
  precision_ = precision;
  tuning_ = time_gemms;
  ASSIGN_OR_RETURN(key_prefix_, GemmChoicePrefix(gpu_name, precision));
  ASSIGN_OR_RETURN(lt_, CublasLt());
  CUBLAS_RETURN_IF_ERROR(lt_->Create(&handle_));
  CUDA_RETURN_IF_ERROR(cudaMalloc(&workspace_, workspace_bytes));
  workspace_bytes_ = workspace_bytes;
  return Status::Ok();
}

std::string LtGemm::CacheKey(const Key& key) const {
  return key_prefix_ + std::to_string(key.m) + "," + std::to_string(key.n) + "," +
         std::to_string(key.k) + "|" + std::to_string(static_cast<int>(key.epilogue)) +
         (key.fp8 ? "|e4m3" : "");
}

bool LtGemm::CachedChoice(const Key& key, Plan* plan) const {
  cublasLtMatmulAlgo_t algo;
  {
    TuningCache& cache = SharedTuningCache();
    std::lock_guard lock(cache.mu);
    auto hit = cache.algos.find(CacheKey(key));
    if (hit == cache.algos.end()) return false;
    algo = hit->second;
  }
  // A plan's bytes are untrusted: cuBLASLt checks the algorithm against
  // this GEMM's descriptors before it may run.
  cublasLtMatmulHeuristicResult_t checked{};
  if (lt_->MatmulAlgoCheck(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, &algo,
                           &checked) != CUBLAS_STATUS_SUCCESS ||
      checked.state != CUBLAS_STATUS_SUCCESS || checked.workspaceSize > workspace_bytes_)
    return false;
  plan->algo = algo;
  return true;
}

StatusOr<LtGemm::Plan*> LtGemm::GetPlan(const Key& key, const void* bias) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  Plan plan;
  // A cached choice spares the heuristic, whose first call in a process
  // takes ~0.1 s on the H200 (GpuContextWarmup makes it early, off the
  // critical path, but a plan's engine need not wait for it).
  Status st = MakeDescriptors(key, bias, &plan);
  if (st.ok() && CachedChoice(key, &plan)) {
    plan.tuned = true;
    ++cached_shapes_;
  } else if (st.ok()) {
    st = AskHeuristic(key, &plan);
    plan.tuned = !tuning_ || plan.candidates.size() < 2;
  }
  if (!st.ok()) {
    DestroyPlan(plan);
    return st;
  }
  if (plan.tuned) plan.candidates.clear();
  return &plans_.emplace(key, std::move(plan)).first->second;
}

// Each candidate runs for about kTimedMs (kMinRuns..kMaxRuns times, so that a
// GEMM of a few microseconds is not timed at the events' resolution), in two
// rounds, keeping its better round. Another algorithm replaces the
// heuristic's first answer only when it is more than kMargin faster: with 3
// runs each and no margin, the choices made some batch sizes 1-2% slower in
// the forward on the H200 than the heuristic's (bench/RESULTS.md,
// 2026-11-30).
Status LtGemm::Tune(const Key& key, Plan& plan, const void* x, const void* w, const void* c,
                    void* y, float beta, cudaStream_t stream) {
  constexpr float kTimedMs = 0.5f, kMargin = 0.03f;
  constexpr int kMinRuns = 3, kMaxRuns = 200, kRounds = 2;
  const float alpha = 1.0f;
  Event start, stop;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start.e));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop.e));
  const size_t n = plan.candidates.size();
  std::vector<float> best(n, std::numeric_limits<float>::infinity());
  std::vector<int> runs(n, 0);  // 0: the library cannot run it here (skipped, not an error)
  auto run = [&](size_t i) {
    return lt_->Matmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, c, plan.c, y,
                       plan.c, &plan.candidates[i], workspace_, workspace_bytes_, stream);
  };
  auto time_runs = [&](size_t i, int count, float* ms_per_run) -> Status {
    CUDA_RETURN_IF_ERROR(cudaEventRecord(start.e, stream));
    for (int r = 0; r < count; ++r) run(i);
    CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.e, stream));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.e));
    float ms = 0;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.e, stop.e));
    *ms_per_run = ms / count;
    return Status::Ok();
  };
  for (size_t i = 0; i < n; ++i) {
    if (run(i) != CUBLAS_STATUS_SUCCESS) continue;
    float once = 0;
    RETURN_IF_ERROR(time_runs(i, 1, &once));
    runs[i] = std::clamp(static_cast<int>(kTimedMs / std::max(once, 1e-4f)), kMinRuns, kMaxRuns);
  }
  for (int round = 0; round < kRounds; ++round)
    for (size_t i = 0; i < n; ++i) {
      if (runs[i] == 0) continue;
      float ms = 0;
      RETURN_IF_ERROR(time_runs(i, runs[i], &ms));
      best[i] = std::min(best[i], ms);
    }
  size_t fastest = 0;
  for (size_t i = 1; i < n; ++i)
    if (best[i] < best[fastest]) fastest = i;
  if (runs[0] > 0 && best[fastest] > (1.0f - kMargin) * best[0]) fastest = 0;
  plan.algo = plan.candidates[fastest];
  plan.candidates.clear();
  plan.tuned = true;
  ++tuned_shapes_;
  TuningCache& cache = SharedTuningCache();
  std::lock_guard lock(cache.mu);
  // Another engine may have tuned the same shape meanwhile: one answer wins,
  // so that identical GPUs compute identical bits.
  plan.algo = cache.algos.emplace(CacheKey(key), plan.algo).first->second;
  return Status::Ok();
}

// Row-major y[n, m] = x[n, k] W^T is, read column-major, D[m, n] = W'[k, m]^T x'[k, n]:
// A = W with transa = T, B = x with transb = N, D with leading dimension m.
Status LtGemm::MakeDescriptors(const Key& key, const void* bias, Plan* p) const {
  const cudaDataType_t dt = DataType(precision_);
  // FP8: A (W) and B (x) in E4M3, transposed as below (the only layout
  // cuBLASLt's FP8 kernels take: "TN"); C and D in the engine's precision.
  const cudaDataType_t operands = key.fp8 ? CUDA_R_8F_E4M3 : dt;
  const CublasLtApi& lt = *lt_;
  CUBLAS_RETURN_IF_ERROR(lt.MatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  RETURN_IF_ERROR(SetDesc(lt, p->desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  RETURN_IF_ERROR(SetDesc(lt, p->desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  RETURN_IF_ERROR(SetDesc(lt, p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, LtEpilogue(key.epilogue)));
  RETURN_IF_ERROR(SetDesc(lt, p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
  CUBLAS_RETURN_IF_ERROR(lt.MatrixLayoutCreate(&p->a, operands, key.k, key.m, key.k));
  CUBLAS_RETURN_IF_ERROR(lt.MatrixLayoutCreate(&p->b, operands, key.k, key.n, key.k));
  CUBLAS_RETURN_IF_ERROR(lt.MatrixLayoutCreate(&p->c, dt, key.m, key.n, key.m));
  return Status::Ok();
}

Status LtGemm::AskHeuristic(const Key& key, Plan* p) const {
  const CublasLtApi& lt = *lt_;
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_RETURN_IF_ERROR(lt.MatmulPreferenceCreate(&pref));
  cublasStatus_t st = lt.MatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_));
  cublasLtMatmulHeuristicResult_t results[kTunedCandidates] = {};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt.MatmulAlgoGetHeuristic(handle_, p->desc, p->a, p->b, p->c, p->c, pref, kTunedCandidates,
                                   results, &found);
  lt.MatmulPreferenceDestroy(pref);
  const std::string shape = "[" + std::to_string(key.n) + ", " + std::to_string(key.k) + "] x [" +
                            std::to_string(key.m) + ", " + std::to_string(key.k) + "]^T in " +
                            PrecisionName(precision_);
  if (st != CUBLAS_STATUS_SUCCESS)
    return CublasStatus(st, ("algorithm heuristic for " + shape).c_str());
  if (found == 0) return Unimplemented("cuBLASLt has no algorithm for the linear layer " + shape);
  p->algo = results[0].algo;
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p->candidates.push_back(results[i].algo);
  return Status::Ok();
}

Status LtGemm::Linear(const void* x, int rows, int in, const void* w, const void* bias, int out,
                      Epilogue epilogue, const void* residual, void* y, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  return Run(Key{out, rows, in, epilogue}, x, w, 1.0f, bias, residual, y, stream);
}

Status LtGemm::LinearFp8(const void* x, int rows, int in, const void* w, float scale,
                         const void* bias, int out, Epilogue epilogue, const void* residual,
                         void* y, cudaStream_t stream) {
  if (precision_ == Precision::kFp32)
    return InvalidArgument("FP8 GEMMs write fp16 or bf16; this engine computes in fp32");
  if (!Fp8GemmTakes(in, out))
    return InvalidArgument("FP8 GEMMs need both widths to be multiples of 16, not " +
                           std::to_string(in) + " -> " + std::to_string(out));
  if (!(scale > 0.0f)) return InvalidArgument("FP8 GEMM: the scale must be positive");
  if (rows == 0) return Status::Ok();
  return Run(Key{out, rows, in, epilogue, true}, x, w, scale, bias, residual, y, stream);
}

Status LtGemm::Run(const Key& key, const void* x, const void* w, float alpha, const void* bias,
                   const void* residual, void* y, cudaStream_t stream) {
  if (key.epilogue == Epilogue::kBiasGelu)
    return InvalidArgument("cuBLASLt has no erf GELU epilogue: run it through LinearLayers");
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Plan * plan, GetPlan(key, bias));
  RETURN_IF_ERROR(SetDesc(*lt_, plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
  const float beta = residual ? 1.0f : 0.0f;
  // With beta = 0, C is not read; D stands in for it.
  const void* c = residual ? residual : y;
  if (!plan->tuned) {
    // Timing needs real launches: never inside a graph capture. y is
    // distinct from x, w and c, so the repeated runs change nothing else.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (capture == cudaStreamCaptureStatusNone)
      RETURN_IF_ERROR(Tune(key, *plan, x, w, c, y, beta, stream));
  }
  CUBLAS_RETURN_IF_ERROR(lt_->Matmul(handle_, plan->desc, &alpha, w, plan->a, x, plan->b, &beta, c,
                                     plan->c, y, plan->c, &plan->algo, workspace_, workspace_bytes_,
                                     stream));
  return Status::Ok();
}

StatusOr<std::string> GemmChoicePrefix(const std::string& gpu_name, Precision precision) {
  ASSIGN_OR_RETURN(const CublasLtApi* lt, CublasLt());
  return gpu_name + "|cublasLt " + std::to_string(lt->GetVersion()) + "|" +
         PrecisionName(precision) + "|";
}

Status AddGemmChoices(const std::vector<GemmChoice>& choices) {
  std::vector<std::pair<std::string, cublasLtMatmulAlgo_t>> parsed;
  auto nibble = [](char h) { return h <= '9' ? h - '0' : h - 'a' + 10; };
  for (const GemmChoice& c : choices) {
    if (!c.AlgoWellFormed())
      return InvalidArgument("GEMM choice for " + c.gemm +
                             ": the algorithm is not 128 lowercase hex digits; rebuild the plan");
    cublasLtMatmulAlgo_t algo{};
    static_assert(sizeof(algo) == 64, "cublasLtMatmulAlgo_t is 64 bytes");
    auto* bytes = reinterpret_cast<unsigned char*>(&algo);
    for (size_t i = 0; i < sizeof(algo); ++i)
      bytes[i] = static_cast<unsigned char>(nibble(c.algo[2 * i]) << 4 | nibble(c.algo[2 * i + 1]));
    parsed.emplace_back(c.gemm, algo);
  }
  TuningCache& cache = SharedTuningCache();
  std::lock_guard lock(cache.mu);
  for (auto& [name, algo] : parsed) cache.algos.emplace(name, algo);
  return Status::Ok();
}

std::vector<GemmChoice> GemmChoicesWithPrefix(const std::string& prefix) {
  std::vector<GemmChoice> out;
  TuningCache& cache = SharedTuningCache();
  std::lock_guard lock(cache.mu);
  for (const auto& [name, algo] : cache.algos) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const auto* bytes = reinterpret_cast<const unsigned char*>(&algo);
    std::string hex;
    char digits[3];
    for (size_t i = 0; i < sizeof(algo); ++i) {
      std::snprintf(digits, sizeof(digits), "%02x", bytes[i]);
      hex += digits;
    }
    out.push_back({name, hex});
  }
  std::sort(out.begin(), out.end(),
            [](const GemmChoice& a, const GemmChoice& b) { return a.gemm < b.gemm; });
  return out;
}

}  // namespace bertrt::cuda

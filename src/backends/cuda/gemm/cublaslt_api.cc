#include "backends/cuda/gemm/cublaslt_api.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace bertrt::cuda {
namespace {

StatusOr<CublasLtApi> Open() {
  const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  // RTLD_LOCAL: its symbols stay out of the global namespace; the table is
  // the only way in. The loader's search path (LD_LIBRARY_PATH, ld.so.cache)
  // first, then the toolkit the build used and the toolkit's usual homes.
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  const std::string first_error = lib ? "" : dlerror();
  for (const char* dir : {BERTRT_CUDA_LIBRARY_DIR, "/usr/local/cuda/lib64",
                          "/usr/local/cuda/targets/x86_64-linux/lib"}) {
    if (lib) break;
    lib = dlopen((std::string(dir) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib)
    return FailedPrecondition("cannot open " + name + " (" + first_error + "): install the CUDA " +
                              std::to_string(CUBLAS_VER_MAJOR) +
                              " cuBLAS library or add its directory to LD_LIBRARY_PATH");
  CublasLtApi api{};
  std::string missing;
  auto bind = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + symbol;
  };
  bind(api.Create, "cublasLtCreate");
  bind(api.Destroy, "cublasLtDestroy");
  bind(api.GetVersion, "cublasLtGetVersion");
  bind(api.Matmul, "cublasLtMatmul");
  bind(api.MatmulAlgoCheck, "cublasLtMatmulAlgoCheck");
  bind(api.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  bind(api.MatmulDescCreate, "cublasLtMatmulDescCreate");
  bind(api.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
  bind(api.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  bind(api.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  bind(api.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  bind(api.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  bind(api.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  bind(api.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  if (!missing.empty())
    return FailedPrecondition(name + " lacks " + missing + ": it is not the cuBLAS " +
                              std::to_string(CUBLAS_VER_MAJOR) + " this bertrt was built with");
  return api;  // the library stays open for the life of the process
}

}  // namespace

StatusOr<const CublasLtApi*> CublasLt() {
  static const StatusOr<CublasLtApi> api = Open();
  if (!api.ok()) return api.status();
  return &*api;
}

void WarmUpCublasLt() {
  StatusOr<const CublasLtApi*> lt = CublasLt();
  if (!lt.ok()) return;  // the engine reports it
  const CublasLtApi& api = **lt;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  if (api.Create(&handle) == CUBLAS_STATUS_SUCCESS &&
      api.MatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
      api.MatrixLayoutCreate(&layout, CUDA_R_16F, 64, 64, 64) == CUBLAS_STATUS_SUCCESS &&
      api.MatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    api.MatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, pref, 1, &result,
                               &found);
  }
  if (pref) api.MatmulPreferenceDestroy(pref);
  if (layout) api.MatrixLayoutDestroy(layout);
  if (desc) api.MatmulDescDestroy(desc);
  if (handle) api.Destroy(handle);
}

}  // namespace bertrt::cuda

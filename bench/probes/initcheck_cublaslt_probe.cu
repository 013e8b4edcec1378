// Probe (not part of the build): does compute-sanitizer's initcheck see the stores of cuBLASLt's
// sm90 fp16 GEMM kernels (nvjet_*)? The engine's initcheck runs flag the attention kernels' reads
// of qkv, which such a GEMM wrote (bench/NOTES.md). Here a GEMM with a bias epilogue (as the
// engine's QKV projection) writes every element of a fresh cudaMalloc buffer, checked against a
// host reference, and a plain kernel then reads every element: any initcheck report on that read is
// initcheck missing the GEMM's stores, since nothing else wrote the buffer and every value read is
// the GEMM's.
//   nvcc -O2 -std=c++17 -arch=sm_90a bench/probes/initcheck_cublaslt_probe.cu -lcublasLt -o probe
//   compute-sanitizer --tool initcheck ./probe
#include <cublasLt.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#define CHECK(x)                                                          \
  do {                                                                    \
    if (!(x)) {                                                           \
      std::fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x); \
      return 2;                                                           \
    }                                                                     \
  } while (0)

// Sums every element of y (16-byte loads, as the attention kernels read qkv).
__global__ void SumAll(const uint4* y, size_t n16, float* out) {
  float s = 0.0f;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += gridDim.x * blockDim.x) {
    const uint4 v = y[i];
    const __half2* h = reinterpret_cast<const __half2*>(&v);
    for (int k = 0; k < 4; ++k) s += __low2float(h[k]) + __high2float(h[k]);
  }
  atomicAdd(out, s);
}

int main() {
  const int rows = 16384, in = 768, out = 2304;  // BERT-base batch 128 x 128, QKV
  std::vector<__half> x(static_cast<size_t>(rows) * in), w(static_cast<size_t>(out) * in), b(out);
  for (size_t i = 0; i < x.size(); ++i) x[i] = __float2half(((i * 7919) % 2001) / 1000.0f - 1.0f);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = __float2half(((i * 104729) % 2001) / 50000.0f - 0.02f);
  for (int i = 0; i < out; ++i) b[i] = __float2half((i % 17) / 100.0f);
  __half *dx, *dw, *db, *dy;
  float* dsum;
  CHECK(cudaMalloc(&dx, x.size() * 2) == cudaSuccess);
  CHECK(cudaMalloc(&dw, w.size() * 2) == cudaSuccess);
  CHECK(cudaMalloc(&db, b.size() * 2) == cudaSuccess);
  CHECK(cudaMalloc(&dy, static_cast<size_t>(rows) * out * 2) ==
        cudaSuccess);  // never written but by the GEMM
  CHECK(cudaMalloc(&dsum, sizeof(float)) == cudaSuccess);
  CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemset(dsum, 0, sizeof(float)) == cudaSuccess);

  // y[rows, out] = x[rows, in] w[out, in]^T + b, column-major as cuBLAS sees
  // it: y^T[out, rows] = w[out, in] x^T, i.e. A = w (transposed), B = x.
  cublasLtHandle_t lt;
  CHECK(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t op;
  CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n));
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof(db));
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, in, out, in);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, in, rows, in);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, out, rows, out);
  const float one = 1.0f, zero = 0.0f;
  CHECK(cublasLtMatmul(lt, op, &one, dw, la, dx, lb, &zero, dy, lc, dy, lc, nullptr, nullptr, 0,
                       nullptr) == CUBLAS_STATUS_SUCCESS);
  SumAll<<<264, 256>>>(reinterpret_cast<const uint4*>(dy), static_cast<size_t>(rows) * out / 8,
                       dsum);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);

  // Every output against a float64 reference, on a sample of rows (all
  // columns), and the device sum against the host sum of the device values.
  std::vector<__half> y(static_cast<size_t>(rows) * out);
  CHECK(cudaMemcpy(y.data(), dy, y.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  double worst = 0.0, host_sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i) host_sum += __half2float(y[i]);
  for (int r = 0; r < rows; r += 997)
    for (int c = 0; c < out; ++c) {
      double s = __half2float(b[c]);
      for (int k = 0; k < in; ++k)
        s += double(__half2float(x[static_cast<size_t>(r) * in + k])) *
             __half2float(w[static_cast<size_t>(c) * in + k]);
      worst = std::fmax(worst, std::fabs(s - __half2float(y[static_cast<size_t>(r) * out + c])) /
                                   (1.0 + std::fabs(s)));
    }
  float dev_sum = 0.0f;
  CHECK(cudaMemcpy(&dev_sum, dsum, sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  std::printf(
      "GEMM max relative error %.3g (fp16 rounding ~1e-3); sum of all outputs: device %.6g, "
      "host %.6g\n",
      worst, dev_sum, host_sum);
  return worst < 4e-3 && std::fabs(dev_sum - host_sum) <= 1e-3 * (1.0 + std::fabs(host_sum)) ? 0
                                                                                             : 1;
}

// LayerNorm kernels: one block per row, the row staged in shared memory as
// fp32 so that the statistics take two exact passes (mean, then variance).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace bertrt::cuda {
namespace {

constexpr int kMaxThreads = 256;

int ThreadsFor(int hidden) { return std::min(kMaxThreads, (hidden + 31) / 32 * 32); }

// Normalizes row[0, hidden) (shared memory) into out.
template <typename T>
__device__ void NormalizeRow(const float* row, int hidden, const float* gamma, const float* beta,
                             float eps, float* scratch, T* out) {
  float sum = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) sum += row[i];
  const float mean = BlockSum(sum, scratch) / hidden;
  float sq = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float d = row[i] - mean;
    sq += d * d;
  }
  const float inv_std = 1.0f / sqrtf(BlockSum(sq, scratch) / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    out[i] = FromFloat<T>((row[i] - mean) * inv_std * gamma[i] + beta[i]);
}

template <typename T>
__global__ void EmbedLayerNormKernel(EmbeddingArgs a) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  const int s = SequenceOf(a.cu_seqlens, a.num_seqs, t);
  const size_t h = a.hidden;
  const T* word = static_cast<const T*>(a.word) + static_cast<size_t>(a.ids[t]) * h;
  const T* pos = static_cast<const T*>(a.position) + static_cast<size_t>(t - a.cu_seqlens[s]) * h;
  const T* type = static_cast<const T*>(a.type) + static_cast<size_t>(a.types[t]) * h;
  for (int i = threadIdx.x; i < a.hidden; i += blockDim.x)
    row[i] = ToFloat(word[i]) + ToFloat(pos[i]) + ToFloat(type[i]);
  __syncthreads();
  NormalizeRow(row, a.hidden, a.gamma, a.beta, a.eps, scratch, static_cast<T*>(a.out) + t * h);
}

template <typename T>
__global__ void LayerNormKernel(const T* in, T* out, int hidden, const float* gamma,
                                const float* beta, float eps) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const size_t offset = static_cast<size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) row[i] = ToFloat(in[offset + i]);
  __syncthreads();
  NormalizeRow(row, hidden, gamma, beta, eps, scratch, out + offset);
}

}  // namespace

Status EmbedLayerNorm(Precision p, const EmbeddingArgs& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return Status::Ok();
  const size_t smem = a.hidden * sizeof(float);
  BERTRT_DISPATCH_PRECISION(
      p, EmbedLayerNormKernel<T><<<a.num_tokens, ThreadsFor(a.hidden), smem, stream>>>(a));
  CUDA_RETURN_IF_LAUNCH_FAILED("embedding + LayerNorm kernel");
  return Status::Ok();
}

Status LayerNorm(Precision p, const void* in, void* out, int rows, int hidden,
                 const float* gamma, const float* beta, float eps, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  const size_t smem = hidden * sizeof(float);
  BERTRT_DISPATCH_PRECISION(p, LayerNormKernel<T><<<rows, ThreadsFor(hidden), smem, stream>>>(
                                   static_cast<const T*>(in), static_cast<T*>(out), hidden,
                                   gamma, beta, eps));
  CUDA_RETURN_IF_LAUNCH_FAILED("LayerNorm kernel");
  return Status::Ok();
}

}  // namespace bertrt::cuda

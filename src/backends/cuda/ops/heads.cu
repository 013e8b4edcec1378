// Kernels of the task heads: they read the final hidden states and produce
// the fp32 outputs that go back to the host.
#include <algorithm>

#include "backends/cuda/ops/heads.h"
#include "backends/cuda/ops/launch.h"
#include "backends/cuda/util/cuda_check.h"
#include "backends/cuda/util/device_util.cuh"

namespace bertrt::cuda {
namespace {

template <typename T>
__global__ void GatherFirstTokensKernel(const T* x, const int32_t* cu, int hidden, T* out) {
  AfterPreviousKernel();
  const int s = blockIdx.x;
  const T* row = x + static_cast<size_t>(cu[s]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    out[static_cast<size_t>(s) * hidden + i] = row[i];
}

__device__ float Activate(float v, DenseActivation act) {
  switch (act) {
    case DenseActivation::kIdentity: return v;
    case DenseActivation::kTanh: return tanhf(v);
    case DenseActivation::kRelu: return fmaxf(v, 0.0f);
    case DenseActivation::kGelu: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case DenseActivation::kSigmoid: return 1.0f / (1.0f + expf(-v));
  }
  return v;
}

template <typename T>
__global__ void ActivateToFloatKernel(const T* in, float* out, size_t n, DenseActivation act) {
  AfterPreviousKernel();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = Activate(ToFloat(in[i]), act);
}

// One warp per output element: lanes stride over the input features.
template <typename T>
__global__ void SmallLinearKernel(const T* x, int rows, int in, const float* w, const float* b,
                                  int out, float* y) {
  AfterPreviousKernel();
  const size_t warp = (blockIdx.x * size_t{blockDim.x} + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= static_cast<size_t>(rows) * out) return;
  const size_t r = warp / out;
  const int j = static_cast<int>(warp % out);
  const T* xr = x + r * in;
  const float* wj = w + static_cast<size_t>(j) * in;
  float acc = 0.0f;
  for (int k = lane; k < in; k += 32) acc += ToFloat(xr[k]) * wj[k];
  acc = WarpSum(acc);
  if (lane == 0) y[r * out + j] = acc + (b ? b[j] : 0.0f);
}

// Block per sequence, threads over the columns; sentence-transformers'
// definitions of each mode.
template <typename T>
__global__ void PoolKernel(const T* x, const int32_t* cu, const int32_t* pool_start, int hidden,
                           Pooling pooling, float* out, int out_stride) {
  AfterPreviousKernel();
  const int s = blockIdx.x;
  const int first = cu[s], skip = pool_start[s];
  const int begin = first + skip, end = cu[s + 1], len = end - begin;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v;
    if (pooling == Pooling::kCls || pooling == Pooling::kLastToken) {
      const int t = pooling == Pooling::kCls ? begin : end - 1;
      v = ToFloat(x[static_cast<size_t>(t) * hidden + i]);
    } else if (pooling == Pooling::kMax) {
      v = -INFINITY;
      for (int t = begin; t < end; ++t) v = fmaxf(v, ToFloat(x[static_cast<size_t>(t) * hidden + i]));
    } else {
      // Position weights 1, 2, ... for weightedmean; 1 for the means.
      const bool weighted = pooling == Pooling::kWeightedMean;
      v = 0.0f;
      for (int t = begin; t < end; ++t)
        v += (weighted ? static_cast<float>(t - first + 1) : 1.0f) *
             ToFloat(x[static_cast<size_t>(t) * hidden + i]);
      v /= pooling == Pooling::kMean          ? static_cast<float>(len)
           : pooling == Pooling::kMeanSqrtLen ? sqrtf(static_cast<float>(len))
                                              : 0.5f * len * (len + 1.0f + 2.0f * skip);
    }
    out[static_cast<size_t>(s) * out_stride + i] = v;
  }
}

// A Dense module's activation, in place.
__global__ void DenseActivationKernel(float* x, size_t n, DenseActivation act) {
  AfterPreviousKernel();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    x[i] = Activate(x[i], act);
}

__global__ void L2NormalizeKernel(float* x, int width) {
  AfterPreviousKernel();
  __shared__ float scratch[32];
  float* row = x + static_cast<size_t>(blockIdx.x) * width;
  float sq = 0.0f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) sq += row[i] * row[i];
  const float inv = 1.0f / fmaxf(sqrtf(BlockSum(sq, scratch)), 1e-12f);
  for (int i = threadIdx.x; i < width; i += blockDim.x) row[i] *= inv;
}

int ThreadsFor(int width) { return std::min(256, (width + 31) / 32 * 32); }

// Grid (vocabulary blocks, sequences); a thread per vocabulary entry walks
// its sequence's tokens of the chunk, reading the logits row by row (each
// warp's reads are contiguous).
template <typename T>
__global__ void SpladePoolKernel(const T* logits, int first_token, int rows, const int32_t* cu,
                                 int vocab, bool sum, bool log1p_twice, float* out) {
  AfterPreviousKernel();
  const int s = blockIdx.y, v = blockIdx.x * blockDim.x + threadIdx.x;
  const int begin = max(cu[s], first_token), end = min(cu[s + 1], first_token + rows);
  if (v >= vocab || begin >= end) return;
  float acc = out[static_cast<size_t>(s) * vocab + v];
  for (int t = begin; t < end; ++t) {
    float f = log1pf(fmaxf(ToFloat(logits[static_cast<size_t>(t - first_token) * vocab + v]), 0.0f));
    if (log1p_twice) f = log1pf(f);
    acc = sum ? acc + f : fmaxf(acc, f);
  }
  out[static_cast<size_t>(s) * vocab + v] = acc;
}

}  // namespace

Status SpladePool(Precision p, const void* logits, int first_token, int rows,
                  const int32_t* cu_seqlens, int num_seqs, int vocab, bool sum, bool log1p_twice,
                  float* out, Stream stream) {
  if (num_seqs == 0 || rows == 0) return Status::Ok();
  const dim3 grid((vocab + 255) / 256, num_seqs);
  BERTRT_DISPATCH_PRECISION(p, Launch(SpladePoolKernel<T>, grid, 256, 0, stream,
                                      static_cast<const T*>(logits), first_token, rows,
                                      cu_seqlens, vocab, sum, log1p_twice, out));
  CUDA_RETURN_IF_LAUNCH_FAILED("SPLADE pooling kernel");
  return Status::Ok();
}

Status GatherFirstTokens(Precision p, const void* x, const int32_t* cu_seqlens, int num_seqs,
                         int hidden, void* out, Stream stream) {
  if (num_seqs == 0) return Status::Ok();
  BERTRT_DISPATCH_PRECISION(p, Launch(GatherFirstTokensKernel<T>, num_seqs, ThreadsFor(hidden), 0,
                                      stream, static_cast<const T*>(x), cu_seqlens, hidden,
                                      static_cast<T*>(out)));
  CUDA_RETURN_IF_LAUNCH_FAILED("gather first tokens kernel");
  return Status::Ok();
}

Status ActivateToFloat(Precision p, const void* in, float* out, size_t n, DenseActivation act,
                       Stream stream) {
  if (n == 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 4096));
  BERTRT_DISPATCH_PRECISION(p, Launch(ActivateToFloatKernel<T>, blocks, 256, 0, stream,
                                      static_cast<const T*>(in), out, n, act));
  CUDA_RETURN_IF_LAUNCH_FAILED("activation kernel");
  return Status::Ok();
}

Status SmallLinear(Precision p, const void* x, int rows, int in, const float* w, const float* b,
                   int out, float* y, Stream stream) {
  const size_t warps = static_cast<size_t>(rows) * out;
  if (warps == 0) return Status::Ok();
  constexpr int kThreads = 256;
  const size_t blocks = (warps * 32 + kThreads - 1) / kThreads;
  BERTRT_DISPATCH_PRECISION(p, Launch(SmallLinearKernel<T>, static_cast<unsigned>(blocks),
                                      kThreads, 0, stream, static_cast<const T*>(x), rows, in,
                                      w, b, out, y));
  CUDA_RETURN_IF_LAUNCH_FAILED("head linear kernel");
  return Status::Ok();
}

Status PoolSequences(Precision p, const void* x, const int32_t* cu_seqlens,
                     const int32_t* pool_start, int num_seqs, int hidden, Pooling pooling,
                     float* out, int out_stride, Stream stream) {
  if (num_seqs == 0) return Status::Ok();
  BERTRT_DISPATCH_PRECISION(p, Launch(PoolKernel<T>, num_seqs, ThreadsFor(hidden), 0, stream,
                                      static_cast<const T*>(x), cu_seqlens, pool_start, hidden,
                                      pooling, out, out_stride));
  CUDA_RETURN_IF_LAUNCH_FAILED("pooling kernel");
  return Status::Ok();
}

Status ApplyDenseActivation(float* x, size_t n, DenseActivation act, Stream stream) {
  if (n == 0 || act == DenseActivation::kIdentity) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 4096));
  Launch(DenseActivationKernel, blocks, 256, 0, stream, x, n, act);
  CUDA_RETURN_IF_LAUNCH_FAILED("Dense activation kernel");
  return Status::Ok();
}

Status L2NormalizeRows(float* x, int rows, int width, Stream stream) {
  if (rows == 0) return Status::Ok();
  Launch(L2NormalizeKernel, rows, ThreadsFor(width), 0, stream, x, width);
  CUDA_RETURN_IF_LAUNCH_FAILED("L2 normalize kernel");
  return Status::Ok();
}

}  // namespace bertrt::cuda

// Element-wise kernels: activations and precision conversions.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace bertrt::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops bound the grid; this many blocks keep every SM busy.
unsigned BlocksFor(size_t n) {
  return static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 4096));
}

template <HiddenAct kAct>
__device__ __forceinline__ float Activate(float v) {
  if constexpr (kAct == HiddenAct::kGelu) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  } else if constexpr (kAct == HiddenAct::kGeluTanh) {
    return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  } else {
    return fmaxf(v, 0.0f);
  }
}

// x is 16-byte aligned: whole 16-byte vectors first (one wide load and store
// per thread and step, the erf being cheap next to the memory traffic), then
// the few elements of a tail.
template <typename T, HiddenAct kAct>
__global__ void ActivationKernel(T* x, size_t n) {
  AfterPreviousKernel();
  constexpr int kSize = Vec16<T>::kSize;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  const size_t first = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  const size_t vecs = n / kSize;
  Vec16<T>* xv = reinterpret_cast<Vec16<T>*>(x);
  for (size_t i = first; i < vecs; i += stride) {
    Vec16<T> v = xv[i];
#pragma unroll
    for (int j = 0; j < kSize; ++j) v.v[j] = FromFloat<T>(Activate<kAct>(ToFloat(v.v[j])));
    xv[i] = v;
  }
  for (size_t i = vecs * kSize + first; i < n; i += stride)
    x[i] = FromFloat<T>(Activate<kAct>(ToFloat(x[i])));
}

template <typename T>
void LaunchActivation(HiddenAct act, T* x, size_t n, Stream stream) {
  const unsigned blocks = BlocksFor((n + Vec16<T>::kSize - 1) / Vec16<T>::kSize);
  switch (act) {
    case HiddenAct::kGelu:
      Launch(ActivationKernel<T, HiddenAct::kGelu>, blocks, kThreads, 0, stream, x, n);
      break;
    case HiddenAct::kGeluTanh:
      Launch(ActivationKernel<T, HiddenAct::kGeluTanh>, blocks, kThreads, 0, stream, x, n);
      break;
    case HiddenAct::kRelu:
      Launch(ActivationKernel<T, HiddenAct::kRelu>, blocks, kThreads, 0, stream, x, n);
      break;
  }
}

template <typename T>
__global__ void FromFloatKernel(const float* in, T* out, size_t n) {
  AfterPreviousKernel();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = FromFloat<T>(in[i]);
}

template <typename T>
__global__ void ToFloatKernel(const T* in, float* out, size_t n) {
  AfterPreviousKernel();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = ToFloat(in[i]);
}

// One thread reads the GPU's global nanosecond timer, which every
// multiprocessor shares (SM clocks are per multiprocessor and throttle).
__global__ void StampKernel(uint64_t* slot) {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  *slot = now;
}

// __CUDA_ARCH__ of the code that runs: 750 for compute_75 PTX, whatever the GPU.
__global__ void CodeArchKernel(int* arch) {
#if defined(__CUDA_ARCH__)
  *arch = __CUDA_ARCH__;
#endif
}

}  // namespace

StatusOr<int> KernelComputeCapability(cudaStream_t stream) {
  DeviceBuffer device_arch;
  RETURN_IF_ERROR(device_arch.Allocate(sizeof(int), "the kernels' architecture", ""));
  CodeArchKernel<<<1, 1, 0, stream>>>(static_cast<int*>(device_arch.get()));
  CUDA_RETURN_IF_LAUNCH_FAILED("architecture probe kernel");
  int arch = 0;
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&arch, device_arch.get(), sizeof(int), cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return arch / 10;
}

Status StampTime(uint64_t* slot, cudaStream_t stream) {
  StampKernel<<<1, 1, 0, stream>>>(slot);
  CUDA_RETURN_IF_LAUNCH_FAILED("timer stamp kernel");
  return Status::Ok();
}

Status ActivationInPlace(Precision p, HiddenAct act, void* x, size_t n, Stream stream) {
  if (n == 0) return Status::Ok();
  BERTRT_DISPATCH_PRECISION(p, LaunchActivation(act, static_cast<T*>(x), n, stream));
  CUDA_RETURN_IF_LAUNCH_FAILED("activation kernel");
  return Status::Ok();
}

Status ConvertFromFloat(Precision p, const float* in, void* out, size_t n, Stream stream) {
  if (n == 0) return Status::Ok();
  BERTRT_DISPATCH_PRECISION(p, Launch(FromFloatKernel<T>, BlocksFor(n), kThreads, 0, stream, in,
                                      static_cast<T*>(out), n));
  CUDA_RETURN_IF_LAUNCH_FAILED("conversion kernel");
  return Status::Ok();
}

Status ConvertToFloat(Precision p, const void* in, float* out, size_t n, Stream stream) {
  if (n == 0) return Status::Ok();
  BERTRT_DISPATCH_PRECISION(p, Launch(ToFloatKernel<T>, BlocksFor(n), kThreads, 0, stream,
                                      static_cast<const T*>(in), out, n));
  CUDA_RETURN_IF_LAUNCH_FAILED("conversion kernel");
  return Status::Ok();
}

}  // namespace bertrt::cuda

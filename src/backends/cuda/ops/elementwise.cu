// Element-wise kernels: activations (plain and gated), rotary positions and
// precision conversions.
#include <cuda_fp8.h>

#include <algorithm>

#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/ops/launch.h"
#include "backends/cuda/ops/uint8_grid.cuh"
#include "backends/cuda/util/cuda_check.h"
#include "backends/cuda/util/device_memory.h"
#include "backends/cuda/util/device_util.cuh"

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

// GeGLU: out[r, i] = act(in[r, i]) * in[r, inter + i], kVec elements at a
// time (16-byte vectors where a row's halves start 16-byte aligned).
template <typename T, HiddenAct kAct, int kVec>
__global__ void GatedActivationKernel(const T* in, int rows, int inter, T* out) {
  AfterPreviousKernel();
  const int per_row = inter / kVec;
  const size_t n = static_cast<size_t>(rows) * per_row;
  for (size_t k = blockIdx.x * size_t{blockDim.x} + threadIdx.x; k < n;
       k += size_t{gridDim.x} * blockDim.x) {
    const size_t r = k / per_row;
    const int i = static_cast<int>(k % per_row) * kVec;
    const T* a = in + r * 2 * inter + i;
    T* o = out + r * inter + i;
    if constexpr (kVec == 1) {
      *o = FromFloat<T>(Activate<kAct>(ToFloat(*a)) * ToFloat(a[inter]));
    } else {
      const Vec16<T> x = *reinterpret_cast<const Vec16<T>*>(a);
      const Vec16<T> gate = *reinterpret_cast<const Vec16<T>*>(a + inter);
      Vec16<T> y;
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        y.v[j] = FromFloat<T>(Activate<kAct>(ToFloat(x.v[j])) * ToFloat(gate.v[j]));
      *reinterpret_cast<Vec16<T>*>(o) = y;
    }
  }
}

template <typename T, HiddenAct kAct>
void LaunchGated(const T* in, int rows, int inter, T* out, Stream stream) {
  constexpr int kSize = Vec16<T>::kSize;
  if (inter % kSize == 0) {
    Launch(GatedActivationKernel<T, kAct, kSize>, BlocksFor(size_t(rows) * inter / kSize),
           kThreads, 0, stream, in, rows, inter, out);
  } else {
    Launch(GatedActivationKernel<T, kAct, 1>, BlocksFor(size_t(rows) * inter), kThreads, 0,
           stream, in, rows, inter, out);
  }
}

// Rotary positions: thread k takes kVec consecutive pairs (i, i + half) of
// one head of one token, in Q and in K, as 16-byte vectors where the halves
// split into them (with single elements the kernel ran at ~60% of the H200's
// bandwidth: 0.20 ms a layer for ModernBERT-base's 65,536 tokens).
template <typename T, int kVec>
__global__ void RotaryKernel(T* qkv, const int32_t* cu, int num_seqs, int tokens, int hidden,
                             int heads, const float* table) {
  AfterPreviousKernel();
  const int d = hidden / heads, half = d / 2, chunks = half / kVec;
  const size_t per_token = static_cast<size_t>(heads) * chunks;
  const size_t n = static_cast<size_t>(tokens) * per_token;
  for (size_t k = blockIdx.x * size_t{blockDim.x} + threadIdx.x; k < n;
       k += size_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(k / per_token);
    const int head = static_cast<int>(k % per_token) / chunks;
    const int i = static_cast<int>(k % per_token) % chunks * kVec;
    const int position = t - cu[SequenceOf(cu, num_seqs, t)];
    const float2* cs =
        reinterpret_cast<const float2*>(table) + static_cast<size_t>(position) * half + i;
    float c[kVec], sn[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float2 v = cs[e];
      c[e] = v.x;
      sn[e] = v.y;
    }
    T* row = qkv + static_cast<size_t>(t) * 3 * hidden + head * d + i;
#pragma unroll
    for (int part = 0; part < 2; ++part) {  // Q, then K
      T* x = row + part * hidden;
      if constexpr (kVec == 1) {
        const float a = ToFloat(x[0]), b = ToFloat(x[half]);
        x[0] = FromFloat<T>(a * c[0] - b * sn[0]);
        x[half] = FromFloat<T>(b * c[0] + a * sn[0]);
      } else {
        Vec16<T> lo = *reinterpret_cast<const Vec16<T>*>(x);
        Vec16<T> hi = *reinterpret_cast<const Vec16<T>*>(x + half);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float a = ToFloat(lo.v[e]), b = ToFloat(hi.v[e]);
          lo.v[e] = FromFloat<T>(a * c[e] - b * sn[e]);
          hi.v[e] = FromFloat<T>(b * c[e] + a * sn[e]);
        }
        *reinterpret_cast<Vec16<T>*>(x) = lo;
        *reinterpret_cast<Vec16<T>*>(x + half) = hi;
      }
    }
  }
}

template <typename T>
void LaunchRotary(T* qkv, const int32_t* cu, int num_seqs, int tokens, int hidden, int heads,
                  const float* table, Stream stream) {
  constexpr int kSize = Vec16<T>::kSize;
  const int half = hidden / heads / 2;
  // Rows (3 hidden) and heads (d = 2 half) then start 16-byte aligned too.
  if (half % kSize == 0) {
    Launch(RotaryKernel<T, kSize>, BlocksFor(size_t(tokens) * (hidden / 2) / kSize), kThreads, 0,
           stream, qkv, cu, num_seqs, tokens, hidden, heads, table);
  } else {
    Launch(RotaryKernel<T, 1>, BlocksFor(size_t(tokens) * (hidden / 2)), kThreads, 0, stream, qkv,
           cu, num_seqs, tokens, hidden, heads, table);
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

// x (the engine's precision) divided by its scale and rounded to E4M3
// (nearest even, saturating at +-448: __NV_SATFINITE), as core/half.h's
// FloatToE4M3 rounds the CPU's emulation; 16 bytes of x at a time where in
// and out are aligned for it (kVectors), else one element at a time.
// kActivate: act(x) first, rounded to T as ActivationKernel writes it, so
// that the one pass gives the bytes the activation kernel and the
// quantization would give in two.
template <typename T, bool kActivate, HiddenAct kAct, bool kVectors>
__global__ void ToE4M3Kernel(const T* in, float inverse_scale, __nv_fp8_storage_t* out,
                             size_t n) {
  AfterPreviousKernel();
  auto convert = [&](T v) {
    float f = ToFloat(v);
    if constexpr (kActivate) f = ToFloat(FromFloat<T>(Activate<kAct>(f)));
    return __nv_cvt_float_to_fp8(f * inverse_scale, __NV_SATFINITE, __NV_E4M3);
  };
  constexpr int kSize = Vec16<T>::kSize;
  struct alignas(kSize) Bytes {
    __nv_fp8_storage_t b[kSize];
  };
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  const size_t first = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  size_t done = 0;
  if constexpr (kVectors) {
    const size_t vecs = n / kSize;
    for (size_t i = first; i < vecs; i += stride) {
      const Vec16<T> v = reinterpret_cast<const Vec16<T>*>(in)[i];
      Bytes b;
#pragma unroll
      for (int j = 0; j < kSize; ++j) b.b[j] = convert(v.v[j]);
      reinterpret_cast<Bytes*>(out)[i] = b;
    }
    done = vecs * kSize;
  }
  for (size_t i = done + first; i < n; i += stride) out[i] = convert(in[i]);
}

template <typename T, bool kActivate, HiddenAct kAct>
void LaunchToE4M3(const T* in, float inverse_scale, __nv_fp8_storage_t* out, size_t n,
                  Stream stream) {
  constexpr int kSize = Vec16<T>::kSize;
  const bool vectors = reinterpret_cast<uintptr_t>(in) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out) % kSize == 0;
  if (vectors) {
    Launch(ToE4M3Kernel<T, kActivate, kAct, true>, BlocksFor((n + kSize - 1) / kSize), kThreads,
           0, stream, in, inverse_scale, out, n);
  } else {
    Launch(ToE4M3Kernel<T, kActivate, kAct, false>, BlocksFor(n), kThreads, 0, stream, in,
           inverse_scale, out, n);
  }
}

// Each row of `in` [rows, width] onto uint8 (int8_gemm.h), as the CPU
// engine's Int8Gemm quantizes it (WriteUint8WarpRow), one warp a row, 16
// bytes of the row at a time (width a multiple of 16). The row is read
// once: each lane keeps its vectors of it in registers between the range and
// the rounding (rows up to 32 * kVecs vectors wide).
template <typename T, int kVecs>
__global__ void ToUint8RowsKernel(const T* in, int rows, int width, const float* mult,
                                  float input_scale, uint8_t* out, float* row_scales,
                                  int32_t* row_zeros) {
  AfterPreviousKernel();
  const int warps = blockDim.x / 32, lane = threadIdx.x % 32, vecs = width / Vec16<T>::kSize;
  // The lane's vectors: lane + 32 i < vecs.
  const int count = (vecs - lane + 31) / 32;
  for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
    const auto* x = reinterpret_cast<const Vec16<T>*>(in + size_t(r) * width);
    Vec16<T> held[kVecs];
#pragma unroll
    for (int i = 0; i < kVecs && i < count; ++i) held[i] = x[lane + 32 * i];
    WriteUint8WarpRow<T, kVecs>(held, count, mult, input_scale, out + size_t(r) * width,
                                row_scales + r, row_zeros + r);
  }
}

// ToUint8RowsKernel with room for `width`'s vectors in each lane's registers.
template <typename T>
Status LaunchToUint8Rows(const T* in, int rows, int width, const float* mult, float input_scale,
                         uint8_t* out, float* row_scales, int32_t* row_zeros, Stream stream) {
  constexpr int kRowsPerBlock = kThreads / 32;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock, 8192));
  const int lane_vecs = (width / Vec16<T>::kSize + 31) / 32;
  auto launch = [&](auto kernel) {
    Launch(kernel, blocks, kThreads, 0, stream, in, rows, width, mult, input_scale, out,
           row_scales, row_zeros);
    return Status::Ok();
  };
  if (lane_vecs <= 4) return launch(ToUint8RowsKernel<T, 4>);
  if (lane_vecs <= 8) return launch(ToUint8RowsKernel<T, 8>);
  if (lane_vecs <= 16) return launch(ToUint8RowsKernel<T, 16>);
  return InvalidArgument("int8 quantization: rows of at most " +
                         std::to_string(32 * 16 * Vec16<T>::kSize) + " elements");
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

Status GatedActivation(Precision p, HiddenAct act, const void* in, int rows, int inter,
                       void* out, Stream stream) {
  if (rows == 0) return Status::Ok();
  BERTRT_DISPATCH_PRECISION(p, {
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    switch (act) {
      case HiddenAct::kGelu:
        LaunchGated<T, HiddenAct::kGelu>(x, rows, inter, y, stream);
        break;
      case HiddenAct::kGeluTanh:
        LaunchGated<T, HiddenAct::kGeluTanh>(x, rows, inter, y, stream);
        break;
      case HiddenAct::kRelu:
        LaunchGated<T, HiddenAct::kRelu>(x, rows, inter, y, stream);
        break;
    }
  });
  CUDA_RETURN_IF_LAUNCH_FAILED("gated activation kernel");
  return Status::Ok();
}

Status ApplyRotary(Precision p, void* qkv, const int32_t* cu_seqlens, int num_seqs, int tokens,
                   int hidden, int heads, const float* table, Stream stream) {
  if (tokens == 0) return Status::Ok();
  BERTRT_DISPATCH_PRECISION(p, LaunchRotary(static_cast<T*>(qkv), cu_seqlens, num_seqs, tokens,
                                            hidden, heads, table, stream));
  CUDA_RETURN_IF_LAUNCH_FAILED("rotary position kernel");
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

Status QuantizeToE4M3(Precision p, const void* in, float scale, void* out, size_t n,
                      Stream stream) {
  return ActivateToE4M3(p, std::nullopt, in, scale, out, n, stream);
}

Status ActivateToE4M3(Precision p, std::optional<HiddenAct> act, const void* in, float scale,
                      void* out, size_t n, Stream stream) {
  if (n == 0) return Status::Ok();
  if (!(scale > 0.0f)) return InvalidArgument("fp8 quantization: the scale must be positive");
  // (As the CPU's emulation: a multiplication by the reciprocal.)
  const float inverse = 1.0f / scale;
  auto* bytes = static_cast<__nv_fp8_storage_t*>(out);
  BERTRT_DISPATCH_PRECISION(p, {
    const T* x = static_cast<const T*>(in);
    if (!act) {
      LaunchToE4M3<T, false, HiddenAct::kRelu>(x, inverse, bytes, n, stream);  // (act unused)
    } else if (*act == HiddenAct::kGelu) {
      LaunchToE4M3<T, true, HiddenAct::kGelu>(x, inverse, bytes, n, stream);
    } else if (*act == HiddenAct::kGeluTanh) {
      LaunchToE4M3<T, true, HiddenAct::kGeluTanh>(x, inverse, bytes, n, stream);
    } else {
      LaunchToE4M3<T, true, HiddenAct::kRelu>(x, inverse, bytes, n, stream);
    }
  });
  CUDA_RETURN_IF_LAUNCH_FAILED(act ? "activation and fp8 quantization kernel"
                                   : "fp8 quantization kernel");
  return Status::Ok();
}

Status QuantizeRowsToUint8(Precision p, const void* in, int rows, int width, const float* mult,
                           float input_scale, void* out, float* row_scales, int32_t* row_zeros,
                           Stream stream) {
  if (rows == 0) return Status::Ok();
  auto aligned = [](const void* a) { return reinterpret_cast<uintptr_t>(a) % 16 == 0; };
  if (width % 16 || !aligned(in) || !aligned(out) || !aligned(mult))
    return InvalidArgument("int8 quantization: rows of a multiple of 16 elements and "
                           "multipliers, 16-byte aligned, expected");
  if (input_scale < 0.0f) return InvalidArgument("int8 quantization: negative input scale");
  // (Only fp16 runs it: the int8 engine's other operations run in fp16.)
  if (p != Precision::kFp16) return InvalidArgument("int8 quantization: fp16 input expected");
  const auto* x = static_cast<const __half*>(in);
  auto* bytes = static_cast<uint8_t*>(out);
  RETURN_IF_ERROR(LaunchToUint8Rows<__half>(x, rows, width, mult, input_scale, bytes, row_scales,
                                            row_zeros, stream));
  CUDA_RETURN_IF_LAUNCH_FAILED("int8 quantization kernel");
  return Status::Ok();
}

}  // namespace bertrt::cuda

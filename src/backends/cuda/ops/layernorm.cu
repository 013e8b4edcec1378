// LayerNorm kernels. Rows whose width splits into 16-byte vectors across a
// warp (BERT-base/large: 768, 1024) take one warp per row: the row stays in
// registers, the statistics take two exact passes over them (mean, then
// variance) with shuffles only, and every load and store is 16 bytes wide.
// Other widths take one block per row, staged in shared memory as fp32.
#include <cuda_fp8.h>

#include <algorithm>
#include <type_traits>

#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/ops/launch.h"
#include "backends/cuda/ops/layernorm.h"
#include "backends/cuda/ops/uint8_grid.cuh"
#include "backends/cuda/util/cuda_check.h"
#include "backends/cuda/util/device_util.cuh"

namespace bertrt::cuda {
namespace {

constexpr int kMaxThreads = 256;
// The warp path holds up to this many 16-byte vectors of a row per lane:
// rows up to 2048 wide in fp16/bf16, 1024 in fp32.
constexpr int kMaxVecsPerLane = 8;
constexpr int kWarpRowsPerBlock = 4;
// From this many rows a LayerNorm's warps take two rows each (BERT-large at
// 98,304 rows: 105 us per LayerNorm against 154 us with one row per warp, on
// the H200).
constexpr int kTwoRowsPerWarpFrom = 8192;

int ThreadsFor(int hidden) { return std::min(kMaxThreads, (hidden + 31) / 32 * 32); }

// Vectors per lane for the warp path, or 0 when the row does not split evenly.
int WarpVecsFor(Precision p, int hidden) {
  const int per_warp = 32 * (p == Precision::kFp32 ? 4 : 8);
  if (hidden % per_warp != 0 || hidden / per_warp > kMaxVecsPerLane) return 0;
  return hidden / per_warp;
}

// ---- warp per row ----

// The lane's share of a row: vector i of lane l covers columns
// (i * 32 + l) * kSize onwards, so a warp's loads are contiguous.
template <typename T>
__device__ __forceinline__ int VecColumn(int i) {
  return (i * 32 + (threadIdx.x & 31)) * Vec16<T>::kSize;
}

template <typename T>
__device__ __forceinline__ void AddVec(const T* src, int col, float* x) {
  const Vec16<T> v = *reinterpret_cast<const Vec16<T>*>(src + col);
#pragma unroll
  for (int j = 0; j < Vec16<T>::kSize; ++j) x[j] += ToFloat(v.v[j]);
}

// The lane's kVecs vectors of a row in fp32: x[i * kSize + j] is element j
// of vector i.
template <typename T, int kVecs>
__device__ __forceinline__ void RowToFloats(const Vec16<T> (&v)[kVecs],
                                            float (&x)[kVecs * Vec16<T>::kSize]) {
#pragma unroll
  for (int i = 0; i < kVecs; ++i)
#pragma unroll
    for (int j = 0; j < Vec16<T>::kSize; ++j) x[i * Vec16<T>::kSize + j] = ToFloat(v[i].v[j]);
}

// Loads the lane's gamma and beta for vector i (kSize floats each).
template <typename T>
__device__ __forceinline__ void LoadAffineVec(const float* gamma, const float* beta, int i,
                                              float* g, float* b) {
  const int col = VecColumn<T>(i);
#pragma unroll
  for (int j = 0; j < Vec16<T>::kSize; j += 4) {
    *reinterpret_cast<float4*>(g + j) = *reinterpret_cast<const float4*>(gamma + col + j);
    *reinterpret_cast<float4*>(b + j) = *reinterpret_cast<const float4*>(beta + col + j);
  }
}

// The lane's gamma and beta, loaded up front. They are weights, which no
// kernel writes: a latency-bound LayerNorm (few rows) loads them before
// waiting for the previous kernel (programmatic dependent launch), so that
// their round trip overlaps that kernel's end instead of following the
// row's statistics.
template <typename T, int kVecs>
struct LaneAffine {
  static constexpr int kSize = Vec16<T>::kSize;
  float g[kVecs * kSize], b[kVecs * kSize];
  __device__ __forceinline__ void Load(const float* gamma, const float* beta) {
#pragma unroll
    for (int i = 0; i < kVecs; ++i) LoadAffineVec<T>(gamma, beta, i, g + i * kSize, b + i * kSize);
  }
  // NormalizeWarpRow's `affine`.
  __device__ __forceinline__ void operator()(int i, float* gi, float* bi) const {
#pragma unroll
    for (int j = 0; j < kSize; ++j) gi[j] = g[i * kSize + j], bi[j] = b[i * kSize + j];
  }
};

// Where a LayerNorm also writes its row as the next FP8 GEMM's input:
// E4M3(y * inverse_scale) of each value y it writes, y as written (rounded
// to T), so the bytes QuantizeToE4M3 would make of the row; bytes null: not.
struct E4M3Row {
  __nv_fp8_storage_t* bytes = nullptr;
  float inverse_scale = 0.0f;
};

// Where a LayerNorm also writes its row as the int8 GEMM's input
// (Uint8Output), at the row: its bytes, scale and zero point.
struct Uint8Row {
  uint8_t* bytes = nullptr;
  const float* mult = nullptr;
  float input_scale = 0.0f;  // 0: per token
  float* scale = nullptr;
  int32_t* zero = nullptr;
};

// Writes the normalized row (and its E4M3, where e8.bytes, or with kUint8
// its uint8 image); x(k) is the lane's k-th value of it in fp32, k over its
// kVecs vectors (vector k / kSize, element k % kSize); affine(i, g, b) gives
// vector i's gamma and beta.
template <typename T, int kVecs, bool kUint8 = false, typename Values, typename Affine>
__device__ __forceinline__ void NormalizeWarpRow(Values x, Affine affine, float eps, T* out,
                                                 E4M3Row e8 = {}, Uint8Row u8 = {}) {
  constexpr int kSize = Vec16<T>::kSize;
  // The row's width: the warp path's rows are exactly kVecs vectors per lane.
  constexpr float kWidth = 32 * kVecs * kSize;
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecs * kSize; ++k) sum += x(k);
  const float mean = WarpSum(sum) / kWidth;
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecs * kSize; ++k) {
    const float d = x(k) - mean;
    sq += d * d;
  }
  const float inv_std = 1.0f / sqrtf(WarpSum(sq) / kWidth + eps);
  // (The row as written, held for its uint8 image's range.)
  Vec16<T> written[kUint8 ? kVecs : 1];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float g[kSize], b[kSize];
    affine(i, g, b);
    Vec16<T> y;
#pragma unroll
    for (int j = 0; j < kSize; ++j)
      y.v[j] = FromFloat<T>((x(i * kSize + j) - mean) * inv_std * g[j] + b[j]);
    *reinterpret_cast<Vec16<T>*>(out + VecColumn<T>(i)) = y;
    if constexpr (kUint8) written[i] = y;
    if (e8.bytes) {
      struct alignas(kSize) Bytes {
        __nv_fp8_storage_t b[kSize];
      } q;
#pragma unroll
      for (int j = 0; j < kSize; ++j)
        q.b[j] = __nv_cvt_float_to_fp8(ToFloat(y.v[j]) * e8.inverse_scale, __NV_SATFINITE,
                                       __NV_E4M3);
      *reinterpret_cast<Bytes*>(e8.bytes + VecColumn<T>(i)) = q;
    }
  }
  if constexpr (kUint8)
    WriteUint8WarpRow<T, kVecs>(written, kVecs, u8.mult, u8.input_scale, u8.bytes, u8.scale,
                                u8.zero);
}

// The vector count is a template argument so that the row takes exactly the
// registers it needs (a runtime count sized every row for the widest).
template <typename T, int kVecs>
__global__ void __launch_bounds__(32 * kWarpRowsPerBlock)
    EmbedLayerNormWarpKernel(EmbeddingArgs a) {
  constexpr int kSize = Vec16<T>::kSize;
  const int t = blockIdx.x * kWarpRowsPerBlock + (threadIdx.x >> 5);
  LaneAffine<T, kVecs> affine;
  if (t < a.num_tokens) affine.Load(a.gamma, a.beta);
  AfterPreviousKernel();
  if (t >= a.num_tokens) return;  // the whole warp: no block barrier follows
  const int s = SequenceOf(a.cu_seqlens, a.num_seqs, t);
  const size_t h = a.hidden;
  const T* word = static_cast<const T*>(a.word) + static_cast<size_t>(a.ids[t]) * h;
  const T* pos = a.position ? static_cast<const T*>(a.position) +
                                 static_cast<size_t>(t - a.cu_seqlens[s]) * h
                           : nullptr;
  const T* type = static_cast<const T*>(a.type) + static_cast<size_t>(a.types[t]) * h;
  float x[kVecs * kSize];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float* xi = x + i * kSize;
#pragma unroll
    for (int j = 0; j < kSize; ++j) xi[j] = 0.0f;
    const int col = VecColumn<T>(i);
    AddVec(word, col, xi);
    if (pos) AddVec(pos, col, xi);
    AddVec(type, col, xi);
  }
  NormalizeWarpRow<T, kVecs>([&](int k) { return x[k]; }, affine, a.eps,
                             static_cast<T*>(a.out) + t * h);
}

// e8 at row `row` of a [rows, hidden] output.
__device__ __forceinline__ E4M3Row RowOf(E4M3Row e8, int row, int hidden) {
  if (e8.bytes) e8.bytes += static_cast<size_t>(row) * hidden;
  return e8;
}
__device__ __forceinline__ Uint8Row RowOf(Uint8Row u8, int row, int hidden) {
  if (u8.bytes) u8.bytes += static_cast<size_t>(row) * hidden, u8.scale += row, u8.zero += row;
  return u8;
}

// Each warp normalizes kRows rows. One row is converted to fp32 as it is
// loaded: a small batch's LayerNorm is latency-bound, and holding the row as
// loaded bought it nothing (batch 8 on the H200 was 0.3-0.9% slower so,
// within spread). Two rows, for LayerNorms over many rows, are loaded
// together (16-byte vectors: twice the bytes in flight, which stream from
// memory) and each is converted to fp32 once, when its turn comes. (Converted
// at each of the statistics' and the output's passes instead, they took ~17
// instructions per element against ~11; at BERT-large's batch 256 x 384 the
// H200 runs at its power cap, where instructions cost time through energy.)
template <typename T, int kVecs, int kRows, bool kUint8>
__global__ void __launch_bounds__(32 * kWarpRowsPerBlock)
    LayerNormWarpKernel(const T* in, T* out, int rows, int hidden, const float* gamma,
                        const float* beta, float eps, E4M3Row e8, Uint8Row u8) {
  constexpr int kSize = Vec16<T>::kSize;
  const int first = (blockIdx.x * kWarpRowsPerBlock + (threadIdx.x >> 5)) * kRows;
  if constexpr (kRows == 1) {
    LaneAffine<T, kVecs> affine;
    if (first < rows) affine.Load(gamma, beta);
    AfterPreviousKernel();
    if (first >= rows) return;  // the whole warp: no block barrier follows
    const T* row = in + static_cast<size_t>(first) * hidden;
    Vec16<T> v[kVecs];
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
      v[i] = *reinterpret_cast<const Vec16<T>*>(row + VecColumn<T>(i));
    float x[kVecs * kSize];
    RowToFloats(v, x);
    NormalizeWarpRow<T, kVecs, kUint8>([&](int k) { return x[k]; }, affine, eps,
                                       out + static_cast<size_t>(first) * hidden,
                                       RowOf(e8, first, hidden), RowOf(u8, first, hidden));
  } else {
    AfterPreviousKernel();
    Vec16<T> v[kRows][kVecs];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (first + r >= rows) break;
      const T* row = in + static_cast<size_t>(first + r) * hidden;
#pragma unroll
      for (int i = 0; i < kVecs; ++i)
        v[r][i] = *reinterpret_cast<const Vec16<T>*>(row + VecColumn<T>(i));
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (first + r >= rows) break;  // the whole warp: no block barrier follows
      float x[kVecs * kSize];
      RowToFloats(v[r], x);
      // gamma and beta as each vector is written: this path streams, and
      // its registers go to the rows.
      NormalizeWarpRow<T, kVecs, kUint8>(
          [&](int k) { return x[k]; },
          [&](int i, float* g, float* b) { LoadAffineVec<T>(gamma, beta, i, g, b); }, eps,
          out + static_cast<size_t>(first + r) * hidden, RowOf(e8, first + r, hidden),
          RowOf(u8, first + r, hidden));
    }
  }
}

// ---- block per row (widths the warp path does not split) ----

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
  AfterPreviousKernel();
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  const int s = SequenceOf(a.cu_seqlens, a.num_seqs, t);
  const size_t h = a.hidden;
  const T* word = static_cast<const T*>(a.word) + static_cast<size_t>(a.ids[t]) * h;
  const T* pos = a.position ? static_cast<const T*>(a.position) +
                                 static_cast<size_t>(t - a.cu_seqlens[s]) * h
                           : nullptr;
  const T* type = static_cast<const T*>(a.type) + static_cast<size_t>(a.types[t]) * h;
  for (int i = threadIdx.x; i < a.hidden; i += blockDim.x)
    row[i] = ToFloat(word[i]) + (pos ? ToFloat(pos[i]) : 0.0f) + ToFloat(type[i]);
  __syncthreads();
  NormalizeRow(row, a.hidden, a.gamma, a.beta, a.eps, scratch, static_cast<T*>(a.out) + t * h);
}

template <typename T>
__global__ void LayerNormKernel(const T* in, T* out, int hidden, const float* gamma,
                                const float* beta, float eps) {
  AfterPreviousKernel();
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const size_t offset = static_cast<size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) row[i] = ToFloat(in[offset + i]);
  __syncthreads();
  NormalizeRow(row, hidden, gamma, beta, eps, scratch, out + offset);
}

// The warp path's blocks for `rows` rows, `per_warp` rows to a warp.
unsigned WarpBlocks(int rows, int per_warp = 1) {
  const int rows_per_block = kWarpRowsPerBlock * per_warp;
  return static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
}

// Calls launch(std::integral_constant<int, V>{}) for V = vecs (1..kMaxVecsPerLane).
template <typename Launch>
void WithVecs(int vecs, Launch&& launch) {
  switch (vecs) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 5: return launch(std::integral_constant<int, 5>{});
    case 6: return launch(std::integral_constant<int, 6>{});
    case 7: return launch(std::integral_constant<int, 7>{});
    default: return launch(std::integral_constant<int, 8>{});
  }
}
static_assert(kMaxVecsPerLane == 8, "WithVecs covers 1..8");

}  // namespace

Status EmbedLayerNorm(Precision p, const EmbeddingArgs& a, Stream stream) {
  if (a.num_tokens == 0) return Status::Ok();
  if (const int vecs = WarpVecsFor(p, a.hidden)) {
    BERTRT_DISPATCH_PRECISION(p, WithVecs(vecs, [&](auto v) {
                                Launch(EmbedLayerNormWarpKernel<T, decltype(v)::value>,
                                       WarpBlocks(a.num_tokens), 32 * kWarpRowsPerBlock, 0, stream,
                                       a);
                              }));
  } else {
    const size_t smem = a.hidden * sizeof(float);
    BERTRT_DISPATCH_PRECISION(
        p, Launch(EmbedLayerNormKernel<T>, a.num_tokens, ThreadsFor(a.hidden), smem, stream, a));
  }
  CUDA_RETURN_IF_LAUNCH_FAILED("embedding + LayerNorm kernel");
  return Status::Ok();
}

Status LayerNorm(Precision p, const void* in, void* out, int rows, int hidden, const float* gamma,
                 const float* beta, float eps, Stream stream, E4M3Output e4m3, Uint8Output u8) {
  if (rows == 0) return Status::Ok();
  if (e4m3.bytes && !(e4m3.scale > 0.0f))
    return InvalidArgument("LayerNorm: the E4M3 output's scale must be positive");
  if (u8.bytes && (e4m3.bytes || p != Precision::kFp16 ||
                   reinterpret_cast<uintptr_t>(u8.mult) % 16 != 0))
    return InvalidArgument("LayerNorm: a uint8 output is written from fp16 with 16-byte aligned "
                           "multipliers, and not beside E4M3");
  const int vecs = WarpVecsFor(p, hidden);
  if (vecs) {
    // (As QuantizeToE4M3: a multiplication by the reciprocal.)
    const E4M3Row e8{static_cast<__nv_fp8_storage_t*>(e4m3.bytes),
                     e4m3.bytes ? 1.0f / e4m3.scale : 0.0f};
    // Two rows to a warp double the bytes each has in flight; a small batch
    // keeps one, for the latency of its few rows.
    const bool two = rows >= kTwoRowsPerWarpFrom;
    auto launch = [&](auto kernel, const auto* x, auto* y, Uint8Row q) {
      Launch(kernel, WarpBlocks(rows, two ? 2 : 1), 32 * kWarpRowsPerBlock, 0, stream, x, y, rows,
             hidden, gamma, beta, eps, e8, q);
    };
    if (u8.bytes) {
      const Uint8Row q{static_cast<uint8_t*>(u8.bytes), u8.mult, u8.input_scale, u8.row_scales,
                       u8.row_zeros};
      WithVecs(vecs, [&](auto v) {
        constexpr int kVecs = decltype(v)::value;
        launch(two ? LayerNormWarpKernel<__half, kVecs, 2, true>
                   : LayerNormWarpKernel<__half, kVecs, 1, true>,
               static_cast<const __half*>(in), static_cast<__half*>(out), q);
      });
    } else {
      BERTRT_DISPATCH_PRECISION(p, WithVecs(vecs, [&](auto v) {
                                  constexpr int kVecs = decltype(v)::value;
                                  launch(two ? LayerNormWarpKernel<T, kVecs, 2, false>
                                             : LayerNormWarpKernel<T, kVecs, 1, false>,
                                         static_cast<const T*>(in), static_cast<T*>(out),
                                         Uint8Row{});
                                }));
    }
  } else {
    const size_t smem = hidden * sizeof(float);
    BERTRT_DISPATCH_PRECISION(
        p, Launch(LayerNormKernel<T>, rows, ThreadsFor(hidden), smem, stream,
                  static_cast<const T*>(in), static_cast<T*>(out), hidden, gamma, beta, eps));
  }
  CUDA_RETURN_IF_LAUNCH_FAILED("LayerNorm kernel");
  // Widths off the warp path: the 8-bit input in a pass of its own.
  if (e4m3.bytes && !vecs)
    return QuantizeToE4M3(p, out, e4m3.scale, e4m3.bytes, size_t(rows) * hidden, stream);
  if (u8.bytes && !vecs)
    return QuantizeRowsToUint8(p, out, rows, hidden, u8.mult, u8.input_scale, u8.bytes,
                               u8.row_scales, u8.row_zeros, stream);
  return Status::Ok();
}

}  // namespace bertrt::cuda

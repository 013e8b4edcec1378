// Attention dispatch and the general path: fp32 arithmetic, any head dim up
// to kMaxAttentionHeadDim. It serves fp32 engines (exact parity with the CPU
// engine), head dims the tensor-core kernels do not cover and GPUs older than
// sm_80. Also the first-query kernel (FirstQueryAttention).
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/ops/attention.h"
#include "backends/cuda/ops/attention_mma.cuh"
#include "backends/cuda/ops/attention_tma.cuh"
#include "backends/cuda/ops/attention_wgmma.cuh"
#include "backends/cuda/ops/launch.h"
#include "backends/cuda/util/cuda_check.h"
#include "backends/cuda/util/device_util.cuh"

namespace bertrt::cuda {
namespace {

constexpr int kGenThreads = 128;
constexpr int kGenRowsPerWarp = 4;
constexpr int kGenQueries = kGenThreads / 32 * kGenRowsPerWarp;
constexpr int kGenKeys = 32;  // one key per lane when scoring

size_t GeneralSmemBytes(int d) {
  return sizeof(float) * (kGenQueries * d + kGenKeys * (d + 1) + kGenKeys * d);
}

// One block per (sequence, head, 16 queries); each warp owns 4 query rows
// and walks the keys in 32-key tiles with an online softmax. Lane j scores
// key j of a tile; for the output, lane l accumulates dims l, l + 32, ...
template <typename T, int kDimsPerLane>
__global__ void __launch_bounds__(kGenThreads)
    AttentionGeneralKernel(AttentionArgs a, int d, float scale) {
  AfterPreviousKernel();
  extern __shared__ float smem[];
  float* qs = smem;                     // [kGenQueries][d], pre-scaled
  float* ks = qs + kGenQueries * d;     // [kGenKeys][d + 1]: padded against bank conflicts
  float* vs = ks + kGenKeys * (d + 1);  // [kGenKeys][d]
  const int head = blockIdx.y;
  const int begin = a.by_length[2 * blockIdx.x], len = a.by_length[2 * blockIdx.x + 1];
  const int q0 = blockIdx.z * kGenQueries;
  if (q0 >= len) return;
  const int hidden = a.hidden;
  const size_t ld = 3 * static_cast<size_t>(hidden);
  const T* base = static_cast<const T*>(a.qkv) + begin * ld + head * d;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  for (int i = threadIdx.x; i < kGenQueries * d; i += kGenThreads) {
    const int r = i / d, c = i % d;
    qs[i] = q0 + r < len ? ToFloat(base[(q0 + r) * ld + c]) * scale : 0.0f;
  }

  float m[kGenRowsPerWarp], l[kGenRowsPerWarp], acc[kGenRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int q = 0; q < kGenRowsPerWarp; ++q) {
    m[q] = -INFINITY;
    l[q] = 0.0f;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) acc[q][i] = 0.0f;
  }

  // A local window: only the key tiles some query of the block sees.
  const int w = a.local_window;
  const int k_begin = w ? max(0, q0 - w) : 0;
  const int k_end = w ? min(len, q0 + kGenQueries + w) : len;
  for (int k0 = k_begin; k0 < k_end; k0 += kGenKeys) {
    __syncthreads();  // Q is staged / the previous tile is consumed
    for (int i = threadIdx.x; i < kGenKeys * d; i += kGenThreads) {
      const int r = i / d, c = i % d;
      const bool valid = k0 + r < len;
      const T* row = base + (k0 + r) * ld + c;
      ks[r * (d + 1) + c] = valid ? ToFloat(row[hidden]) : 0.0f;
      vs[r * d + c] = valid ? ToFloat(row[2 * hidden]) : 0.0f;
    }
    __syncthreads();
    const bool key_valid = k0 + lane < len;
#pragma unroll
    for (int q = 0; q < kGenRowsPerWarp; ++q) {
      const float* qrow = qs + (warp * kGenRowsPerWarp + q) * d;
      const float* krow = ks + lane * (d + 1);
      float score = 0.0f;
      for (int c = 0; c < d; ++c) score += qrow[c] * krow[c];
      const int query = q0 + warp * kGenRowsPerWarp + q;
      if (a.position_bias && key_valid && query < len)
        score += a.position_bias[static_cast<size_t>(head) * (2 * a.bias_span - 1) +
                                 a.bias_span - 1 + (k0 + lane) - query];
      const bool seen = key_valid && (!w || abs(k0 + lane - query) <= w);
      score = seen ? score : -INFINITY;
      // Without a window key k0 is valid and the new max finite; with one, a
      // row may see no key of a tile yet: its max stays -inf, and the shift
      // 0 keeps exp(-inf - shift) = 0 instead of NaN.
      const float m_new = fmaxf(m[q], WarpMax(score));
      const float shift = m_new == -INFINITY ? 0.0f : m_new;
      const float p = expf(score - shift);
      const float alpha = expf(m[q] - shift);
      m[q] = m_new;
      l[q] = l[q] * alpha + WarpSum(p);
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) acc[q][i] *= alpha;
      for (int j = 0; j < kGenKeys; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          const int c = lane + 32 * i;
          if (c < d) acc[q][i] += pj * vs[j * d + c];
        }
      }
    }
  }

  T* out = static_cast<T*>(a.ctx) + static_cast<size_t>(begin) * hidden + head * d;
#pragma unroll
  for (int q = 0; q < kGenRowsPerWarp; ++q) {
    const int r = q0 + warp * kGenRowsPerWarp + q;
    if (r >= len) continue;
    const float inv = 1.0f / l[q];
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int c = lane + 32 * i;
      if (c < d) out[static_cast<size_t>(r) * hidden + c] = FromFloat<T>(acc[q][i] * inv);
    }
  }
}

template <typename T, int kDimsPerLane>
Status LaunchGeneral(const AttentionArgs& a, int d, Stream stream) {
  const size_t smem = GeneralSmemBytes(d);
  auto kernel = AttentionGeneralKernel<T, kDimsPerLane>;
  if (smem > 48 * 1024)
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(smem)));
  const dim3 grid(a.num_seqs, a.heads, QueryBlocks(a.max_len, kGenQueries));
  Launch(kernel, grid, kGenThreads, smem, stream, a, d, 1.0f / std::sqrt(static_cast<float>(d)));
  CUDA_RETURN_IF_LAUNCH_FAILED("attention kernel (general path)");
  return Status::Ok();
}

template <typename T>
Status LaunchGeneralFor(const AttentionArgs& a, int d, Stream stream) {
  if (d <= 32) return LaunchGeneral<T, 1>(a, d, stream);
  if (d <= 64) return LaunchGeneral<T, 2>(a, d, stream);
  if (d <= 128) return LaunchGeneral<T, 4>(a, d, stream);
  return LaunchGeneral<T, 8>(a, d, stream);
}

// ---- first queries only ----

constexpr int kFirstThreads = 128;

// kVec elements of T from src as floats (kVec > 1: one 16-byte load).
template <typename T, int kVec>
__device__ __forceinline__ void LoadFloats(const T* src, float* f) {
  if constexpr (kVec == 1) {
    f[0] = ToFloat(*src);
  } else {
    static_assert(kVec == Vec16<T>::kSize);
    const Vec16<T> v = *reinterpret_cast<const Vec16<T>*>(src);
#pragma unroll
    for (int e = 0; e < kVec; ++e) f[e] = ToFloat(v.v[e]);
  }
}

// For PV the block's threads split a head's dims into chunks of `vec` and
// the keys into as many groups as that leaves threads for (one group when
// the chunks alone outnumber the threads).
__host__ __device__ constexpr int FirstQueryKeyGroups(int d, int vec) {
  return kFirstThreads / (d / vec) > 1 ? kFirstThreads / (d / vec) : 1;
}

size_t FirstQuerySmemBytes(int d, int max_len, int vec) {
  return sizeof(float) * (d + max_len + FirstQueryKeyGroups(d, vec) * static_cast<size_t>(d));
}

// Block (s, head). Thread j scores keys j, j + 128, ..., each a whole K row
// read in 16-byte vectors, so that the block's loads are in flight together
// (a warp reduction per key would chain them); then thread (group g, chunk
// c) sums keys g, g + groups, ... of PV over the chunk's dims, and the
// groups' sums are added at the end.
template <typename T, int kVec>
__global__ void __launch_bounds__(kFirstThreads)
    FirstQueryAttentionKernel(FirstQueryAttentionArgs a, float scale) {
  AfterPreviousKernel();
  if (threadIdx.x < 32 && a.prefetch.count > 0)
    PrefetchShare(a.prefetch, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x * gridDim.y);
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  const int d = a.hidden / a.heads, s = blockIdx.x, head = blockIdx.y;
  const int begin = a.cu_seqlens[s];
  const int len = min(a.cu_seqlens[s + 1] - begin, a.max_len);
  float* q = smem;              // [d], scaled
  float* p = q + d;             // [max_len]: scores, then exp(score - max)
  float* part = p + a.max_len;  // [groups][d]
  const size_t ld = a.kv_ld;
  const T* base = static_cast<const T*>(a.kv) + begin * ld + head * d;  // K; V at + hidden
  const T* query = static_cast<const T*>(a.q) +
                   static_cast<size_t>(a.q_by_sequence ? s : begin) * a.q_ld + head * d;
  T* out = static_cast<T*>(a.out) + static_cast<size_t>(s) * a.hidden + head * d;
  if (len <= 0) {  // the same for the whole block, so no barrier is skipped by some
    for (int c = threadIdx.x; c < d; c += kFirstThreads) out[c] = FromFloat<T>(0.0f);
    return;
  }
  for (int c = threadIdx.x; c < d; c += kFirstThreads) q[c] = ToFloat(query[c]) * scale;
  __syncthreads();
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < len; j += kFirstThreads) {
    const T* k = base + j * ld;
    float dot = 0.0f;
    for (int c = 0; c < d; c += kVec) {
      float f[kVec];
      LoadFloats<T, kVec>(k + c, f);
#pragma unroll
      for (int e = 0; e < kVec; ++e) dot += q[c + e] * f[e];
    }
    p[j] = dot;
    mx = fmaxf(mx, dot);
  }
  mx = BlockMax(mx, scratch);  // key 0 exists: finite
  float sum = 0.0f;
  for (int j = threadIdx.x; j < len; j += kFirstThreads) {  // the p[j] this thread wrote
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
  sum = BlockSum(sum, scratch);  // its barriers also publish p
  const int chunks = d / kVec, groups = FirstQueryKeyGroups(d, kVec);
  for (int item = threadIdx.x; item < groups * chunks; item += kFirstThreads) {
    const int g = item / chunks, c = item % chunks * kVec;
    float acc[kVec] = {};
    for (int j = g; j < len; j += groups) {
      float f[kVec];
      LoadFloats<T, kVec>(base + j * ld + a.hidden + c, f);
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] += p[j] * f[e];
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) part[g * d + c + e] = acc[e];
  }
  __syncthreads();
  const float inv = 1.0f / sum;
  for (int c = threadIdx.x; c < d; c += kFirstThreads) {
    float o = 0.0f;
    for (int g = 0; g < groups; ++g) o += part[g * d + c];
    out[c] = FromFloat<T>(o * inv);
  }
}

template <typename T, int kVec>
Status LaunchFirstQuery(const FirstQueryAttentionArgs& a, int d, Stream stream) {
  const size_t smem = FirstQuerySmemBytes(d, a.max_len, kVec);
  auto kernel = FirstQueryAttentionKernel<T, kVec>;
  if (smem > 48 * 1024)
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(smem)));
  Launch(kernel, dim3(a.num_seqs, a.heads), kFirstThreads, smem, stream, a,
         1.0f / std::sqrt(static_cast<float>(d)));
  CUDA_RETURN_IF_LAUNCH_FAILED("attention kernel (first queries)");
  return Status::Ok();
}

// 16-byte loads where a head's dims split into them (qkv's rows and heads
// then start 16-byte aligned), single elements otherwise.
template <typename T>
Status LaunchFirstQueryFor(const FirstQueryAttentionArgs& a, int d, Stream stream) {
  constexpr int kVec = Vec16<T>::kSize;
  if (d % kVec == 0) return LaunchFirstQuery<T, kVec>(a, d, stream);
  return LaunchFirstQuery<T, 1>(a, d, stream);
}

// The tensor-core kernels' grid for blocks of `queries` queries (the TMA
// kernel's units).
long MmaBlocks(const AttentionArgs& a, int queries) {
  return static_cast<long>(a.num_seqs) * a.heads * QueryBlocks(a.max_len, queries);
}

// The same, or an error where one launch cannot take them.
StatusOr<int> LaunchableBlocks(const AttentionArgs& a, int queries) {
  const long blocks = MmaBlocks(a, queries);
  if (blocks > 0x7fffffff)
    return InvalidArgument("attention: " + std::to_string(blocks) +
                           " blocks are more than one launch takes; send smaller batches");
  return static_cast<int>(blocks);
}

// log2(e) / sqrt(d): the tensor-core kernels' softmax runs in base 2 on
// unscaled scores (attention_mma.cuh).
float ScaleLog2(int d) { return 1.4426950408889634f / std::sqrt(static_cast<float>(d)); }

// Whether 128-query blocks still give every multiprocessor one (sequences
// longer than 64 queries fill them).
bool FillsLargeBlocks(const AttentionArgs& a) {
  return a.max_len > 64 && MmaBlocks(a, 128) >= a.sm_count;
}

// Whether 64-query blocks would leave most multiprocessors idle (batch 1 at
// seq 128: 24 blocks on 132): the mma.sync kernel's 32-query blocks serve it.
bool LeavesMostIdle(const AttentionArgs& a) { return 2 * MmaBlocks(a, 64) < a.sm_count; }

// Launches a tensor-core kernel (one dimension of blocks, AttentionBlockAt's
// order) taking (AttentionArgs, scale_log2).
template <int D>
Status LaunchTensorCoreKernel(void (*kernel)(AttentionArgs, float), int threads, size_t smem,
                              int queries, const AttentionArgs& a, Stream stream,
                              const char* what) {
  // Per device, so set on every launch (a host-side attribute, cheap).
  if (smem > 48 * 1024)
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(smem)));
  ASSIGN_OR_RETURN(const int blocks, LaunchableBlocks(a, queries));
  Launch(kernel, dim3(static_cast<unsigned>(blocks)), threads, smem, stream, a, ScaleLog2(D));
  CUDA_RETURN_IF_LAUNCH_FAILED(what);
  return Status::Ok();
}

template <typename T, int D, int kWarps, int kRowTiles>
Status LaunchMma(const AttentionArgs& a, Stream stream) {
  return LaunchTensorCoreKernel<D>(AttentionMmaKernel<T, D, kWarps, kRowTiles>, kWarps * 32,
                                   AttentionMmaSmemBytes<T, D>(), kWarps * 16 * kRowTiles, a,
                                   stream, "attention kernel (mma.sync)");
}

template <typename T, int D, int kGroups>
Status LaunchWgmma(const AttentionArgs& a, Stream stream) {
  return LaunchTensorCoreKernel<D>(AttentionWgmmaKernel<T, D, kGroups>, kGroups * 128,
                                   AttentionWgmmaSmemBytes<T, D>(), kGroups * 64, a, stream,
                                   "attention kernel (wgmma)");
}

// 128-query blocks read each K/V tile once for twice the queries; they pay
// off when sequences fill them. Their 4 warps take two row tiles each (on the
// H200 at seq 128 and 384, 6% and 10% faster than 8 warps with one, although
// the registers leave 8 warps per SM instead of 16). At head dim 128 two row
// tiles would spill, so there 64-query blocks stay; so they do for a batch
// whose 128-query blocks would leave multiprocessors idle (batch 1 at seq
// 128: 12 blocks on 132), where twice the blocks finish in half the time.
template <typename T, int D>
Status LaunchMmaForLength(const AttentionArgs& a, Stream stream) {
  if constexpr (D <= 64) {
    // LaunchMma<T, D, w, r>'s block holds 16 * w * r queries.
    if (FillsLargeBlocks(a)) return LaunchMma<T, D, 4, 2>(a, stream);
    // 32-query blocks (batch 1: 48 blocks instead of 24): 1-2% faster at
    // batch 1 and 2 on the H200; 16-query blocks were no faster than 64.
    if (LeavesMostIdle(a)) return LaunchMma<T, D, 2, 1>(a, stream);
  }
  return LaunchMma<T, D, 4, 1>(a, stream);
}

// The same choice of block size for the wgmma kernel (64 queries per warpgroup).
template <typename T, int D>
Status LaunchWgmmaForLength(const AttentionArgs& a, Stream stream) {
  return FillsLargeBlocks(a) ? LaunchWgmma<T, D, 2>(a, stream) : LaunchWgmma<T, D, 1>(a, stream);
}

// The TMA kernel: persistent blocks, one per multiprocessor (its registers
// and shared memory), each taking every gridDim.x-th unit.
template <typename T, int D, int kConsumers, bool kPingPong>
Status LaunchTma(const AttentionArgs& a, Stream stream) {
  using S = TmaAttentionShape<T, D, kConsumers, kPingPong>;
  auto kernel = AttentionTmaKernel<T, D, kConsumers, kPingPong>;
  CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(S::kSmemBytes)));
  ASSIGN_OR_RETURN(const int units, LaunchableBlocks(a, S::kQueries));
  const long ld = 3L * a.hidden;
  const CUtensorMapSwizzle swizzle =
      D >= 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  ASSIGN_OR_RETURN(const CUtensorMap map,
                   TensorMap2D<T>(a.qkv, a.tokens, ld, ld, S::kBoxRows, S::kBoxDims, swizzle));
  // The outputs in boxes of a consumer's 64 rows, laid out as its Q tile.
  ASSIGN_OR_RETURN(const CUtensorMap ctx_map,
                   TensorMap2D<T>(a.ctx, a.tokens, a.hidden, a.hidden, 64, S::kBoxDims, swizzle));
  const int blocks = std::min(units, std::max(a.sm_count, 1));
  Launch(kernel, dim3(blocks), S::kThreads, S::kSmemBytes, stream, map, ctx_map, a, ScaleLog2(D),
         units);
  CUDA_RETURN_IF_LAUNCH_FAILED("attention kernel (TMA)");
  return Status::Ok();
}

// Whether units of `queries` rows leave at most an eighth of the longest
// sequence's query rows idle (three consumers' 192: none at seq 384, a third
// at seq 128, where units of 128 fit).
bool FillsUnits(const AttentionArgs& a, int queries) {
  return 8L * QueryBlocks(a.max_len, queries) * queries <= 9L * a.max_len;
}

// The TMA kernel's consumers: three warpgroups without ping-pong where
// sequences fill their units, else two taking turns. On the H200
// (bench/RESULTS.md, 2026-11-30): BERT-large at seq 384, attention 12.4 ms
// with three, 15.7 with two taking turns, 16.5 with two not (the wgmma
// kernel: 18.5); three taking turns 16.0. BERT-base at seq 128, batch 128:
// 0.53 ms with two taking turns, 0.56 with two not, 0.61 with three
// (wgmma: 0.65). At head dim 128, three consumers' registers would spill.
template <typename T, int D>
Status LaunchTmaForLength(const AttentionArgs& a, Stream stream) {
  if constexpr (D <= 64) {
    if (FillsUnits(a, TmaAttentionShape<T, D, 3, false>::kQueries))
      return LaunchTma<T, D, 3, false>(a, stream);
  }
  return LaunchTma<T, D, 2, true>(a, stream);
}

// The chosen kernel for element type T (fp16/bf16).
template <typename T>
Status LaunchKernel(AttentionKernel kernel, const AttentionArgs& a, int d, Stream stream) {
  if (kernel == AttentionKernel::kGeneral) return LaunchGeneralFor<T>(a, d, stream);
  if (kernel == AttentionKernel::kTma) {
    if (d == 32) return LaunchTmaForLength<T, 32>(a, stream);
    if (d == 64) return LaunchTmaForLength<T, 64>(a, stream);
    return LaunchTmaForLength<T, 128>(a, stream);
  }
  const bool wgmma = kernel == AttentionKernel::kWgmma;
  switch (d) {
    case 32:
      return wgmma ? LaunchWgmmaForLength<T, 32>(a, stream) : LaunchMmaForLength<T, 32>(a, stream);
    case 64:
      return wgmma ? LaunchWgmmaForLength<T, 64>(a, stream) : LaunchMmaForLength<T, 64>(a, stream);
    default:
      return wgmma ? LaunchWgmmaForLength<T, 128>(a, stream)
                   : LaunchMmaForLength<T, 128>(a, stream);
  }
}

// The head dims the tensor-core kernels take.
bool TensorCoreHeadDim(int d) { return d == 32 || d == 64 || d == 128; }

// Whether the TMA kernel pays. On the H200 (bench/RESULTS.md, 2026-11-30)
// it was 1-7% faster end to end at head dims 64 and 128 in every batch
// tried, and at head dim 32 with equal lengths; but at head dim 32 its
// 128-key tiles are little work per copy, and a ragged batch (32 x 16..128,
// mean length 0.6 of the longest) was 2.5% slower than with the wgmma
// kernel's 64-key tiles. So at head dim 32 it takes batches whose sequences
// are mostly as long as the longest.
bool TmaPays(const AttentionArgs& a, int d) {
  if (!a.allow_tma || a.tokens <= 0) return false;
  return d != 32 || 4L * a.tokens >= 3L * a.num_seqs * a.max_len;
}

Status CheckHeadDim(int d) {
  if (d > kMaxAttentionHeadDim)
    return Unimplemented("attention: head dim " + std::to_string(d) + " is above the " +
                         std::to_string(kMaxAttentionHeadDim) + " the CUDA engine supports");
  return Status::Ok();
}

// kAuto's choice: the general path where no tensor-core kernel applies; on
// sm_90 when built, the TMA or the wgmma kernel, except for a batch so small
// that the mma.sync kernel's 32-query blocks are what keeps the
// multiprocessors busy.
AttentionKernel AutoKernel(Precision p, const AttentionArgs& a, int d) {
  if (p == Precision::kFp32 || !TensorCoreHeadDim(d) || a.compute_capability < 80)
    return AttentionKernel::kGeneral;
  if (a.local_window > 0 || a.position_bias) return AttentionKernel::kMmaSync;
  if (WgmmaAttentionBuilt() && a.compute_capability == 90 && !LeavesMostIdle(a))
    return TmaPays(a, d) ? AttentionKernel::kTma : AttentionKernel::kWgmma;
  return AttentionKernel::kMmaSync;
}

// The kernel `a` gets.
AttentionKernel ChosenKernel(Precision p, const AttentionArgs& a, int d) {
  return a.kernel == AttentionKernel::kAuto ? AutoKernel(p, a, d) : a.kernel;
}

}  // namespace

bool AttentionTakesWindows(Precision p, const AttentionArgs& a) {
  const int d = a.heads > 0 ? a.hidden / a.heads : 0;
  // Sequences no longer than a window run the TMA kernel's two consumers
  // (128-query units; three need sequences near 192 queries).
  static_assert(TmaAttentionShape<__half, 64, 2, true>::kQueries == kAttentionWindow &&
                TmaAttentionShape<__half, 64, 2, true>::kKeys == kAttentionWindow);
  return a.num_seqs > 0 && a.max_len <= kAttentionWindow && TensorCoreHeadDim(d) &&
         ChosenKernel(p, a, d) == AttentionKernel::kTma;
}

Status FirstQueryAttention(Precision p, const FirstQueryAttentionArgs& a, Stream stream) {
  if (a.num_seqs == 0) return Status::Ok();
  const int d = a.hidden / a.heads;
  RETURN_IF_ERROR(CheckHeadDim(d));
  BERTRT_DISPATCH_PRECISION(p, return LaunchFirstQueryFor<T>(a, d, stream));
  return Internal("attention: unknown precision");
}

bool WgmmaAttentionBuilt() {
#if defined(BERTRT_CUDA_SM90A)
  return true;
#else
  return false;
#endif
}

Status Attention(Precision p, const AttentionArgs& a, Stream stream) {
  if (a.num_seqs == 0) return Status::Ok();
  const int d = a.hidden / a.heads;
  RETURN_IF_ERROR(CheckHeadDim(d));
  const AttentionKernel kernel = ChosenKernel(p, a, d);
  if (a.row_bounds != nullptr && !AttentionTakesWindows(p, a))
    return InvalidArgument(
        "attention: packed windows are for the TMA kernel on sequences of at most " +
        std::to_string(kAttentionWindow) + " tokens (AttentionTakesWindows)");
  if (kernel != AttentionKernel::kGeneral) {
    if ((a.position_bias || a.local_window > 0) && kernel != AttentionKernel::kMmaSync)
      return InvalidArgument(
          "attention: a relative position bias or a local window takes the general or the "
          "mma.sync kernel");
    if (p == Precision::kFp32 || !TensorCoreHeadDim(d))
      return InvalidArgument(
          "attention: the tensor-core kernels take fp16/bf16 at head dims "
          "32, 64 and 128, not head dim " +
          std::to_string(d) + " in " + PrecisionName(p));
    if (kernel == AttentionKernel::kMmaSync && a.compute_capability < 80)
      return InvalidArgument("attention: the mma.sync kernel needs sm_80 or newer");
    const bool hopper = kernel == AttentionKernel::kWgmma || kernel == AttentionKernel::kTma;
    if (hopper && !(WgmmaAttentionBuilt() && a.compute_capability == 90))
      return InvalidArgument(
          "attention: the wgmma and TMA kernels need an sm_90 GPU and a build with "
          "CMAKE_CUDA_ARCHITECTURES including 90a");
    if (kernel == AttentionKernel::kTma && a.tokens <= 0)
      return InvalidArgument(
          "attention: the TMA kernel needs the rows of qkv (AttentionArgs::tokens)");
  }
  switch (p) {
    case Precision::kFp32:
      return LaunchGeneralFor<float>(a, d, stream);
    case Precision::kFp16:
      return LaunchKernel<__half>(kernel, a, d, stream);
    case Precision::kBf16:
      return LaunchKernel<__nv_bfloat16>(kernel, a, d, stream);
  }
  return Internal("attention: unknown precision");
}

}  // namespace bertrt::cuda

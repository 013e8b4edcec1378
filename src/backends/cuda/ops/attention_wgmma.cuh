// Variable-length attention on Hopper's warpgroup MMA (wgmma, sm_90a), for
// fp16/bf16 and head dims 32/64/128: the flash-attention loop of
// attention_mma.cuh with each warpgroup (4 warps) owning 64 query rows.
//
// Why: on the H200 the mma.sync kernel ran BERT-large's attention at ~190
// TFLOP/s, latency-bound at 2 blocks of 4 warps per SM (its registers) and
// issuing ~820 instructions per warp and 64-key tile, 128 of them MMAs and
// 32 ldmatrix. Here the tensor cores read K and V from shared memory
// themselves: a 64 x 64 x 16 product is one instruction for the warpgroup
// (eight mma.sync per warp), no ldmatrix is issued, and the accumulators of
// 16 rows per warp leave room for twice the warps per SM. Measured on the
// H200 (bench/RESULTS.md, 2026-11-30): BERT-large 1.1-1.2% faster end to end
// than with the mma.sync kernel, BERT-base batches of 8-128 0-1%; it is
// still latency-bound (tensor pipe ~24% busy), with flash attention 3's
// producer warp, TMA and warpgroup ping-pong as the next step.
//
// Shared memory holds K and V tiles in the canonical swizzled layout the
// tensor cores read without bank conflicts (Swizzle below): a key's row of
// dims is one line of a 128-byte (64-byte at head dim 32) swizzle atom, its
// 16-byte chunks permuted by the key's row within the atom. S = Q K^T reads
// K as a K-major B operand (its k index, dims, is contiguous); O += P V
// reads V as an N-major one (transposed: dims contiguous). Q and P are A
// operands in registers, in the same fragment layout as mma.sync's, so the
// score accumulators become P with no shuffle.
// Accumulator fragments: warp w of the group holds rows 16w + g and
// 16w + g + 8 (g = lane / 4), columns 8i + 2t, 8i + 2t + 1 (t = lane % 4)
// in d[4i .. 4i + 3], exactly mma.sync's C fragments side by side.
#pragma once

#include <cstdint>

#include "backends/cuda/ops/attention_mma.cuh"
#include "backends/cuda/util/wgmma.cuh"

namespace bertrt::cuda {

// The swizzle of a tile with head dim D: 128-byte atoms (8 keys x 64 dims),
// or 64-byte ones (8 keys x 32 dims) at head dim 32, where a key's row is 64
// bytes. A tile of kRows keys (or queries) is D / kAtomDims column blocks of
// kRows x kAtomDims; within a block, key r's row is line r and its chunk
// (8 dims) ch sits at ch ^ (bits 7.. of the line's address), which is the
// XOR the hardware applies to the address (Swizzle<3,4,3> / <2,4,3>), and
// the one TMA's 128- and 64-byte swizzles write.
template <int D, int kRows = kMmaKeys>
struct Swizzle {
  static constexpr int kBytes = D >= 64 ? 128 : 64;  // of an atom's line
  static constexpr int kAtomDims = kBytes / 2;       // 16-bit elements
  static constexpr int kChunks = kBytes / 16;
  static constexpr uint32_t kBlockBytes = kRows * kBytes;     // one column block
  static constexpr uint32_t kAtomBytes = 8 * kBytes;          // 8 lines
  static constexpr uint64_t kMode = kBytes == 128 ? 1 : 2;    // descriptor bits 62-63
  // Element offset of (key r, dim c) in the tile.
  __device__ static int Offset(int r, int c) {
    const int ch = (c % kAtomDims) / 8, line_bits = (r * kBytes / 128) & (kChunks - 1);
    return (c / kAtomDims) * kRows * kAtomDims + r * kAtomDims + ((ch ^ line_bits) << 3) + (c & 7);
  }
};

// K and V tiles per block: iteration j reads K_j and V_{j-1} while K_{j+1}
// and V_j land. (A third slot, which spared a barrier per iteration, was
// 0.6% slower on BERT-large: more shared memory, a register spilled.)
constexpr int kWgmmaStages = 2;

// Dynamic shared memory of one block: kWgmmaStages slots of a K tile and of a
// V tile, plus room to align them to the 1,024 bytes a swizzle pattern repeats over.
template <typename T, int D>
constexpr size_t AttentionWgmmaSmemBytes() {
  return 2 * kWgmmaStages * kMmaKeys * D * sizeof(T) + 1024;
}

// A shared-memory matrix descriptor: start address, leading-dimension byte
// offset (LBO) and stride-dimension byte offset (SBO), in 16-byte units, and
// the swizzle mode. In a swizzled K-major operand SBO is the distance between
// atoms along m/n (LBO unused); in an MN-major one, LBO is the distance
// between atoms along m/n and SBO along k (CUTLASS's canonical GMMA layouts).
__device__ __forceinline__ uint64_t SmemDescriptor(uint32_t addr, uint32_t lbo, uint32_t sbo,
                                                   uint64_t mode) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16 |
         static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32 | mode << 62;
}

// The same from a generic pointer into shared memory.
__device__ __forceinline__ uint64_t SmemDescriptor(const void* p, uint32_t lbo, uint32_t sbo,
                                                   uint64_t mode) {
  return SmemDescriptor(static_cast<uint32_t>(__cvta_generic_to_shared(p)), lbo, sbo, mode);
}

// `desc` moved on by `bytes` in shared memory (a multiple of 16): only its
// address field, bits 0-13 (the address / 16), changes, and no carry leaves
// it, since shared memory addresses stay below the 2^18 bytes it spans. One
// 32-bit add where SmemDescriptor masks, shifts and ors: a tile's
// descriptors are its first one moved on by constants (in the TMA kernel's
// sm_90a code, 20 of 391 instructions per thread and 128-key tile fewer).
__device__ __forceinline__ uint64_t SmemDescriptorAt(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<uint32_t>(desc) + (bytes >> 4));
}

// cp.async writes shared memory through the generic proxy, wgmma reads it
// through the async proxy: each writer fences its own writes before the
// barrier that publishes them.
__device__ __forceinline__ void FenceSharedForAsyncProxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// wgmma reads its register operands and accumulators asynchronously: they
// must be final before wgmma.fence, and are read again only after
// wgmma.wait_group. The compiler knows neither, so each register passes
// through an empty asm at those points (ordered with the fence and the wait,
// which are volatile asms too).
template <int N>
__device__ __forceinline__ void PinRegisters(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void PinRegisters(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending committed wgmma groups of this warpgroup are in flight.
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// The P V side of a warpgroup's flash-attention loop (this kernel's and
// attention_tma.cuh's), 16 query rows per warp in the shapes of
// attention_mma.cuh's helpers (one row tile): the output accumulators O, the
// running max m and partial sum l, and P of the latest tile of kKeys keys,
// the P V product's A operand in registers.
template <typename T, int D, int kKeys>
struct WgmmaOutputs {
  float o[1][D / 8][4], m[1][2], l[1][2];
  uint32_t pa[kKeys / 16][4];  // read by the tensor cores until the product's wait

  __device__ __forceinline__ void Reset() {
#pragma unroll
    for (int d = 0; d < D / 8; ++d) o[0][d][0] = o[0][d][1] = o[0][d][2] = o[0][d][3] = 0.0f;
    m[0][0] = m[0][1] = -INFINITY;
    l[0][0] = l[0][1] = 0.0f;
  }
  __device__ __forceinline__ float (&Flat())[D / 2] {
    return *reinterpret_cast<float(*)[D / 2]>(&o[0][0][0]);
  }
  // O and P are the P V product's register operands.
  __device__ __forceinline__ void PinOperands() {
    PinRegisters(Flat());
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) PinRegisters(pa[kk]);
  }
  // O += P V, V a tile of kKeys keys in shared memory swizzled as Sw says:
  // key block kk (keys 16kk..16kk + 15) starts at its line 16kk.
  template <typename Sw>
  __device__ __forceinline__ void IssuePv(const T* vt) {
    IssuePvAt<Sw>(SmemDescriptor(vt, Sw::kBlockBytes, Sw::kAtomBytes, Sw::kMode));
  }
  // The same with V's descriptor, SmemDescriptor(vt, Sw::kBlockBytes,
  // Sw::kAtomBytes, Sw::kMode), already made.
  template <typename Sw>
  __device__ __forceinline__ void IssuePvAt(uint64_t v0) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk)
      Wgmma<true>(Flat(), pa[kk], SmemDescriptorAt(v0, Sw::Offset(16 * kk, 0) * sizeof(T)), 1, T{});
#endif
  }
  // P from a tile's probabilities (OnlineSoftmaxStep's output), rounded to T.
  __device__ __forceinline__ void Pack(const float (&sc)[kKeys / 8][4]) {
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) PackProbabilities<T>(pa[kk], sc, kk);
  }
};

// One block of kGroups warpgroups per (sequence, head, 64 * kGroups
// queries), in AttentionBlockAt's order; launched with
// AttentionWgmmaSmemBytes<T, D>() of dynamic shared memory.
template <typename T, int D, int kGroups>
__global__ void __launch_bounds__(kGroups * 128, D <= 64 ? 4 / kGroups : 1)
    AttentionWgmmaKernel(AttentionArgs a, float scale_log2) {
  AfterPreviousKernel();
  if (threadIdx.x < 32 && a.prefetch.count > 0) PrefetchShare(a.prefetch, blockIdx.x, gridDim.x);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kThreads = kGroups * 128;
  constexpr int kQueries = kGroups * 64;
  constexpr int kTile = kMmaKeys * D;  // elements of one K or V stage
  constexpr int kChunks = D / 16;
  constexpr int kKeyTiles = kMmaKeys / 8;
  using Sw = Swizzle<D>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Aligned up to 1,024 bytes, so that the hardware's address XOR matches Sw::Offset.
  unsigned char* smem = smem_raw + ((1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
  T* const ks = reinterpret_cast<T*>(smem);  // [kWgmmaStages][kTile]
  T* const vs = ks + kWgmmaStages * kTile;
  auto slot = [](int tile) { return tile % kWgmmaStages * kTile; };

  const AttentionBlock<T> block = AttentionBlockAt<T, D>(a, kQueries, blockIdx.x);
  const int len = block.len, q0 = block.q0;
  if (q0 >= len) return;
  const size_t ld = block.ld;
  const T* const base = block.base;
  const int hidden = a.hidden;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp >> 2, g = lane >> 2, t = lane & 3;
  const int group_q0 = q0 + 64 * group;
  const int row0 = group_q0 + 16 * (warp & 3) + g;  // and row0 + 8
  // wgmma is warpgroup-wide, so a whole group is active or not; one past the
  // sequence's end still copies tiles and meets the barriers.
  const bool active = group_q0 < len;

  // D / 8 consecutive threads copy one key's row of dims (16 bytes each):
  // 128 contiguous bytes per 8 lanes in global memory, and 8 distinct
  // chunks of an atom line (no bank conflict) in shared memory. Keys past
  // the end are zero-filled: their scores are masked to -inf, and a zero V
  // row keeps 0 * V finite. part: 1 for K, 2 for V.
  auto load = [&](T* dst, int k0, int part) {
#pragma unroll
    for (int i = threadIdx.x; i < kMmaKeys * D / 8; i += kThreads) {
      const int r = i / (D / 8), c = (i % (D / 8)) * 8;
      const bool valid = k0 + r < len;
      CopyAsync16(dst + Sw::Offset(r, c), base + (valid ? k0 + r : 0) * ld + part * hidden + c,
                  valid);
    }
  };
  // The products are pipelined across key tiles: iteration j issues
  // S_j = Q K_j^T and O += P_{j-1} V_{j-1} together, and tile j's softmax
  // runs while the tensor cores are still on the P V product (flash
  // attention 3's overlap within a warpgroup). So K and V have rings of
  // their own: iteration j reads K_j and V_{j-1}, while K_{j+1} and V_j,
  // copied at its start, land.
  const int tiles = (len + kMmaKeys - 1) / kMmaKeys;
  load(ks, 0, 1);
  CopyAsyncCommit();

  uint32_t qf[kChunks][4];
  LoadQueryFragments(qf, base, ld, row0, len, t);

  WgmmaOutputs<T, D, kMmaKeys> out;
  out.Reset();

  for (int j = 0; j < tiles; ++j) {
    // K_{j+1} and V_j go where K_{j-1} and V_{j-2} were, read by products
    // waited for before the previous iteration's last barrier.
    if (j + 1 < tiles) load(ks + slot(j + 1), (j + 1) * kMmaKeys, 1);
    load(vs + slot(j), j * kMmaKeys, 2);
    CopyAsyncCommit();
    CopyAsyncWait<1>();  // K_j and V_{j-1} have landed; K_{j+1} and V_j may fly
    FenceSharedForAsyncProxy();
    __syncthreads();
    if (active) {
      const T* kt = ks + slot(j);
      float sc[1][kKeyTiles][4];
      float(&s_flat)[kMmaKeys / 2] = *reinterpret_cast<float(*)[kMmaKeys / 2]>(&sc[0][0][0]);
      out.PinOperands();
      WgmmaFence();
      // S_j over D / 16 chunks of 16 dims: chunk c starts at dim 16c of K's
      // first line (the swizzle of later lines is the hardware's).
      const uint64_t k0 = SmemDescriptor(kt, 16, Sw::kAtomBytes, Sw::kMode);
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        Wgmma<false>(s_flat, qf[c], SmemDescriptorAt(k0, Sw::Offset(0, 16 * c) * sizeof(T)), c > 0,
                     T{});
      WgmmaCommit();
      if (j > 0) out.template IssuePv<Sw>(vs + slot(j - 1));
      WgmmaCommit();
      WgmmaWait<1>();  // S_j; the P V product may still run
      PinRegisters(s_flat);

      if ((j + 1) * kMmaKeys > len) MaskKeysPastEnd(sc, j * kMmaKeys, len, t);  // uniform
      float alpha[1][2];
      OnlineSoftmaxStep(sc, out.m, out.l, alpha, scale_log2);
      WgmmaWait<0>();
      out.PinOperands();
      RescaleOutputs(out.o, alpha);
      out.Pack(sc[0]);
    }
    __syncthreads();  // K_j and V_{j-1} are consumed before the next iteration refills them
  }
  // The last tile's P V product.
  CopyAsyncWait<0>();
  FenceSharedForAsyncProxy();
  __syncthreads();
  if (!active) return;
  out.PinOperands();
  WgmmaFence();
  out.template IssuePv<Sw>(vs + slot(tiles - 1));
  WgmmaCommit();
  WgmmaWait<0>();
  PinRegisters(out.Flat());

  StoreOutputRows(block.out, hidden, out.o[0], out.l[0], row0, len, t);
#else
  // Launched only on sm_90 by a build that compiled sm_90a (attention.cu);
  // anything else is a dispatch bug, reported as a launch failure rather
  // than wrong numbers.
  __trap();
#endif
}

}  // namespace bertrt::cuda

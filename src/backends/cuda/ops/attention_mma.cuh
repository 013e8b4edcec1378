// Variable-length attention on tensor cores (fp16/bf16, head dims 32/64/128),
// flash-attention style: one block of kWarps warps per (sequence, head,
// 16 * kWarps * kRowTiles queries); each warp owns kRowTiles tiles of 16 query
// rows, streams 64-key tiles of K and V through shared memory and keeps the
// softmax running max and sum in fp32 registers, so the [len, len] score
// matrix never exists in memory.
//
// K/V tiles arrive by cp.async into two shared-memory stages: the next tile's
// copy is in flight while the current one is multiplied, and a thread's copies
// are all issued before any is waited on (with plain loads each 16-byte load
// waited for the previous one, and that latency dominated at seq 128).
//
// Fragment layouts are those of PTX mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8):  b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C (16x8):  c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
// so the score accumulators of two adjacent key tiles are exactly the A
// fragment of P for the P V product, with no trip through shared memory. K's
// B fragments come from shared memory through ldmatrix (K rows are the n
// index, dims the contiguous k index) and V's through ldmatrix.trans.
#pragma once

#include <cstdint>

#include "backends/cuda/ops/attention.h"
#include "backends/cuda/util/device_util.cuh"

namespace bertrt::cuda {

constexpr int kMmaKeys = 64;  // per shared-memory tile

// Dynamic shared memory of one block: two stages of a K tile and a V tile,
// rows padded by 16 bytes so that ldmatrix's 8 row addresses hit distinct banks.
template <typename T, int D>
constexpr size_t AttentionMmaSmemBytes() {
  return 2 * 2 * kMmaKeys * (D + 8) * sizeof(T);
}

__device__ __forceinline__ void Mma16816(float* c, const uint32_t* a, const uint32_t* b, __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void Mma16816(float* c, const uint32_t* a, const uint32_t* b,
                                         __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t PackFloats(float lo, float hi, __half) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t PackFloats(float lo, float hi, __nv_bfloat16) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <typename T>
__device__ __forceinline__ uint32_t Load32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Four 8x8 b16 matrices from shared memory: lanes 8m..8m+7 give the row
// addresses of matrix m (16-byte aligned), and r[m] gets (row g, columns
// 2t..2t+1) of matrix m. Untransposed on rows that are B's n index (K's keys)
// that is a B fragment half; with .trans on rows that are B's k index (V's
// keys), the same.
__device__ __forceinline__ void LoadMatrixX4(uint32_t* r, const void* row) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void LoadMatrixX4Transposed(uint32_t* r, const void* row) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16 bytes global -> shared without passing through registers; with
// valid == false the destination is zero-filled and nothing is read (src
// must still be a mapped address).
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src),
               "r"(valid ? 16 : 0));
#endif
}

__device__ __forceinline__ void CopyAsyncCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n");
#endif
}

// Waits until at most `kPending` committed groups of this thread are in flight.
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Blocks of `queries` queries per (sequence, head) that cover the longest sequence.
__host__ __device__ inline int QueryBlocks(int max_len, int queries) {
  return (max_len + queries - 1) / queries;
}

// What a tensor-core kernel's block (the TMA kernel's unit) b works on: its
// sequence's first token and length, its head and first query, where the
// sequence's Q | K | V rows of the head start (rows ld elements apart; K is
// `hidden` elements after Q, V twice that) and its output rows of the head.
//
// The grid is one dimension: heads fastest, then query blocks, then
// sequences in the order a.by_length gives (longest first), so that all of a
// long sequence's blocks start before a shorter one's. Blocks run in about
// their index order, and a block's time follows its sequence's length:
// started last, a long block would set the kernel's end alone. On the H200
// (bench/RESULTS.md, 2026-11-30) the ragged 32 x 16..128 batch was 1.8%
// faster so than with sequences fastest in their own order; equal lengths at
// seq 128 were 0-1% slower (b32, b128), and batch 1 had been 3.6-4.3% faster
// heads first.
template <typename T>
struct AttentionBlock {
  int begin, len, head, q0;
  size_t ld;
  const T* base;
  T* out;
};
template <typename T, int D>
__device__ __forceinline__ AttentionBlock<T> AttentionBlockAt(const AttentionArgs& a, int queries,
                                                              unsigned b) {
  const int query_blocks = QueryBlocks(a.max_len, queries);
  const int head = static_cast<int>(b % a.heads);
  const unsigned rest = b / a.heads;
  const int32_t* seq = a.by_length + 2 * (rest / query_blocks);
  const size_t ld = 3 * static_cast<size_t>(a.hidden);
  return {seq[0],
          seq[1],
          head,
          static_cast<int>(rest % query_blocks) * queries,
          ld,
          static_cast<const T*>(a.qkv) + seq[0] * ld + head * D,
          static_cast<T*>(a.ctx) + static_cast<size_t>(seq[0]) * a.hidden + head * D};
}

// 2^x on the special-function unit with subnormal results flushed to zero
// (far below any probability fp16/bf16 can hold next to the row's maximum,
// which is 1); exp2f wraps the same instruction in subnormal handling.
// 2^-inf = 0.
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The softmax runs in base 2 on unscaled scores: scale_log2 = log2(e) / sqrt(D),
// and a running max of unscaled scores, so that scaling a score and
// subtracting the max are one FMA. The helpers below work on the score
// accumulators of a warp's kRowTiles tiles of 16 query rows (C fragments of
// 16 x 8 key tiles, the layout of mma.sync's m16n8 and of wgmma's m64nN
// alike) and are shared by the mma.sync and the wgmma kernels.

// Q's A fragments (16 rows x 16 dims per chunk) for rows row0 and row0 + 8;
// rows past the sequence's end are zero.
template <typename T, int kChunks>
__device__ __forceinline__ void LoadQueryFragments(uint32_t (&qf)[kChunks][4], const T* base,
                                                   size_t ld, int row0, int len, int t) {
  const int row1 = row0 + 8;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const T* p0 = base + row0 * ld + 16 * c + 2 * t;
    const T* p1 = base + row1 * ld + 16 * c + 2 * t;
    qf[c][0] = row0 < len ? Load32(p0) : 0u;
    qf[c][1] = row1 < len ? Load32(p1) : 0u;
    qf[c][2] = row0 < len ? Load32(p0 + 8) : 0u;
    qf[c][3] = row1 < len ? Load32(p1 + 8) : 0u;
  }
}

// Scores of keys at or past `len` become -inf; the tile starts at key k0.
// Only a sequence's last tile has such keys.
template <int kRowTiles, int kKeyTiles>
__device__ __forceinline__ void MaskKeysPastEnd(float (&sc)[kRowTiles][kKeyTiles][4], int k0,
                                                int len, int t) {
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (k0 + 8 * j + 2 * t + e >= len) {
#pragma unroll
        for (int r = 0; r < kRowTiles; ++r) sc[r][j][e] = sc[r][j][2 + e] = -INFINITY;
      }
    }
  }
}

// Packed windows (AttentionArgs::row_bounds): scores of keys outside a
// row's own sequence, [lo, hi) of the tile, become -inf; rows g and g + 8 of
// a one-row-tile fragment have their own bounds.
template <int kKeyTiles>
__device__ __forceinline__ void MaskKeysOutsideRows(float (&sc)[1][kKeyTiles][4], int lo0, int hi0,
                                                    int lo1, int hi1, int t) {
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int key = 8 * j + 2 * t + e;
      if (key < lo0 || key >= hi0) sc[0][j][e] = -INFINITY;
      if (key < lo1 || key >= hi1) sc[0][j][2 + e] = -INFINITY;
    }
  }
}

// Calls f(score, query row, key) for each score of a warp's row tiles (C
// fragments): row tile r holds rows rows[r] (fragment row g) and rows[r] + 8,
// and the key tile starts at key k0.
template <int kRowTiles, int kKeyTiles, typename F>
__device__ __forceinline__ void ForEachScore(float (&sc)[kRowTiles][kKeyTiles][4], int k0,
                                             const int (&rows)[kRowTiles], int t, F&& f) {
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = k0 + 8 * j + 2 * t + e;
        f(sc[r][j][e], rows[r], key);
        f(sc[r][j][2 + e], rows[r] + 8, key);
      }
    }
  }
}

// A local window (AttentionArgs::local_window): scores of keys more than w
// positions from their query row become -inf.
template <int kRowTiles, int kKeyTiles>
__device__ __forceinline__ void MaskKeysOutsideWindow(float (&sc)[kRowTiles][kKeyTiles][4],
                                                      int k0, const int (&rows)[kRowTiles], int w,
                                                      int t) {
  ForEachScore(sc, k0, rows, t, [w](float& score, int row, int key) {
    if (abs(key - row) > w) score = -INFINITY;
  });
}

// MPNet's relative position bias (AttentionArgs::position_bias): each score
// of a key and a query inside the sequence gets bias[key - query], times
// sqrt_d since the softmax scales the scores afterwards. `bias` is the
// head's row at distance 0. Pairs outside the sequence are masked or never
// stored: their distances may lie outside the table, so they are not read.
template <int kRowTiles, int kKeyTiles>
__device__ __forceinline__ void AddPositionBias(float (&sc)[kRowTiles][kKeyTiles][4], int k0,
                                                const int (&rows)[kRowTiles], int len,
                                                const float* bias, float sqrt_d, int t) {
  ForEachScore(sc, k0, rows, t, [=](float& score, int row, int key) {
    if (key < len && row < len) score += __ldg(bias + key - row) * sqrt_d;
  });
}

// The maxima of rows g and g + 8 of a row tile's scores, taken into mx (its
// values on entry count too): a row's 8-key slices live in the 4 lanes of one
// group.
template <int kKeyTiles>
__device__ __forceinline__ void RowMaxes(const float (&sc)[kKeyTiles][4], float (&mx)[2]) {
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
    mx[0] = fmaxf(mx[0], fmaxf(sc[j][0], sc[j][1]));
    mx[1] = fmaxf(mx[1], fmaxf(sc[j][2], sc[j][3]));
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
  }
}

// A row tile's scores become unnormalized probabilities 2^((s - m) scale_log2)
// against m of rows g and g + 8; sum gets this lane's partial sums of each row.
template <int kKeyTiles>
__device__ __forceinline__ void ExpAgainstMax(float (&sc)[kKeyTiles][4], const float (&m)[2],
                                              float scale_log2, float (&sum)[2]) {
  const float shift0 = -m[0] * scale_log2, shift1 = -m[1] * scale_log2;
  sum[0] = sum[1] = 0.0f;
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sc[j][e] = Exp2(fmaf(sc[j][e], scale_log2, shift0));
      sc[j][2 + e] = Exp2(fmaf(sc[j][2 + e], scale_log2, shift1));
      sum[0] += sc[j][e];
      sum[1] += sc[j][2 + e];
    }
  }
}

// One key tile of the online softmax: the scores become unnormalized
// probabilities, m (running max per fragment row g, g + 8) and l (this
// lane's partial sum) move on, and alpha gets the factor by which the
// output accumulators must shrink (RescaleOutputs; the wgmma kernel applies
// it later than this, once its previous P V product has landed).
// `windowed`: a row may have seen no key yet (a local window); its max then
// stays -inf and the shift is taken from 0, so that its probabilities and
// alpha are 0 rather than NaN.
template <int kRowTiles, int kKeyTiles>
__device__ __forceinline__ void OnlineSoftmaxStep(float (&sc)[kRowTiles][kKeyTiles][4],
                                                  float (&m)[kRowTiles][2],
                                                  float (&l)[kRowTiles][2],
                                                  float (&alpha)[kRowTiles][2], float scale_log2,
                                                  bool windowed = false) {
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
    const float m_old0 = m[r][0], m_old1 = m[r][1];
    float mx[2] = {m_old0, m_old1};
    RowMaxes(sc[r], mx);
    // Without a window the tile holds at least one valid key, so the maxima
    // are finite (and the first tile's alpha is 2^-inf = 0).
    m[r][0] = mx[0];
    m[r][1] = mx[1];
    if (windowed) {
      mx[0] = mx[0] == -INFINITY ? 0.0f : mx[0];
      mx[1] = mx[1] == -INFINITY ? 0.0f : mx[1];
    }
    alpha[r][0] = Exp2((m_old0 - mx[0]) * scale_log2);
    alpha[r][1] = Exp2((m_old1 - mx[1]) * scale_log2);
    float sum[2];
    ExpAgainstMax(sc[r], mx, scale_log2, sum);
    // Partial sums per lane; alpha is uniform along a row, so the lanes'
    // partials are reduced once at the end.
    l[r][0] = l[r][0] * alpha[r][0] + sum[0];
    l[r][1] = l[r][1] * alpha[r][1] + sum[1];
  }
}

template <int kRowTiles, int kDTiles>
__device__ __forceinline__ void RescaleOutputs(float (&o)[kRowTiles][kDTiles][4],
                                               const float (&alpha)[kRowTiles][2]) {
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
    for (int d = 0; d < kDTiles; ++d) {
      o[r][d][0] *= alpha[r][0];
      o[r][d][1] *= alpha[r][0];
      o[r][d][2] *= alpha[r][1];
      o[r][d][3] *= alpha[r][1];
    }
  }
}

// P's A fragment for keys 16kk..16kk + 15 of the tile: the accumulators of
// key tiles 2kk and 2kk + 1, rounded to T.
template <typename T, int kKeyTiles>
__device__ __forceinline__ void PackProbabilities(uint32_t (&pa)[4],
                                                  const float (&sc)[kKeyTiles][4], int kk) {
  pa[0] = PackFloats(sc[2 * kk][0], sc[2 * kk][1], T{});
  pa[1] = PackFloats(sc[2 * kk][2], sc[2 * kk][3], T{});
  pa[2] = PackFloats(sc[2 * kk + 1][0], sc[2 * kk + 1][1], T{});
  pa[3] = PackFloats(sc[2 * kk + 1][2], sc[2 * kk + 1][3], T{});
}

// 1 / the sums of rows row0 and row0 + 8, from each lane's partial sums l
// (a quad of lanes holds a row).
__device__ __forceinline__ void InverseRowSums(const float (&l)[2], float (&inverse)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inverse[h] = 1.0f / sum;
  }
}

// v[i] for i in 0..3 without indexing a register array at run time (which
// would put it in local memory).
__device__ __forceinline__ uint32_t Pick4(const uint32_t (&v)[4], int i) {
  const uint32_t lo = (i & 1) ? v[1] : v[0], hi = (i & 1) ? v[3] : v[2];
  return (i & 2) ? hi : lo;
}

// Divides a row tile's outputs by the row sums (l: this lane's partials) and
// stores rows row0 and row0 + 8 that lie inside the sequence. `out` points at
// the sequence's first output row, this head's first dim. In the fragment
// layout each lane t of a quad holds dims 2t and 2t + 1 of every 8; the quad
// trades them (a 4 x 4 transpose of packed pairs over three shuffles) so that
// lane t stores the 16 contiguous bytes of every fourth d-tile: a quarter of
// the store instructions, and whole sectors. With 4-byte stores, storing took
// ~40% of each seq-128 unit of the TMA kernel on the H200 (bench/RESULTS.md,
// 2026-12-01).
template <typename T, int kDTiles>
__device__ __forceinline__ void StoreOutputRows(T* out, int hidden, const float (&o)[kDTiles][4],
                                                const float (&l)[2], int row0, int len, int t) {
  static_assert(kDTiles % 4 == 0, "head dims that are multiples of 32");
  float inverse[2];
  InverseRowSums(l, inverse);
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // rows row0 and row0 + 8
    const float inv = inverse[h];
    const int row = row0 + 8 * h;
#pragma unroll
    for (int k = 0; k < kDTiles / 4; ++k) {
      // mine[w]: this lane's pair of d-tile 4k + w. got[i]: lane t ^ i's
      // pair of d-tile 4k + t, which is dims 2 (t ^ i) of that d-tile.
      uint32_t mine[4], got[4];
#pragma unroll
      for (int w = 0; w < 4; ++w)
        mine[w] = PackFloats(o[4 * k + w][2 * h] * inv, o[4 * k + w][2 * h + 1] * inv, T{});
      got[0] = Pick4(mine, t);
#pragma unroll
      for (int i = 1; i < 4; ++i) got[i] = __shfl_xor_sync(0xffffffffu, Pick4(mine, t ^ i), i);
      if (row < len)
        *reinterpret_cast<uint4*>(out + static_cast<size_t>(row) * hidden + 8 * (4 * k + t)) =
            make_uint4(Pick4(got, t), Pick4(got, 1 ^ t), Pick4(got, 2 ^ t), Pick4(got, 3 ^ t));
    }
  }
}

// Launched with AttentionMmaSmemBytes<T, D>() of dynamic shared memory.
// Each warp owns kRowTiles tiles of 16 query rows: with two, every K and V
// fragment read from shared memory feeds two MMAs instead of one. One row
// tile up to head dim 64 caps the registers at 128 per thread, so that 16
// warps fit on an SM (at 142, an 8-warp block ran alone).
template <typename T, int D, int kWarps, int kRowTiles>
__global__ void __launch_bounds__(kWarps * 32, kRowTiles == 1 && D <= 64 ? 16 / kWarps : 1)
    AttentionMmaKernel(AttentionArgs a, float scale_log2) {
  AfterPreviousKernel();
  if (threadIdx.x < 32 && a.prefetch.count > 0) PrefetchShare(a.prefetch, blockIdx.x, gridDim.x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kThreads = kWarps * 32;
  constexpr int kWarpRows = 16 * kRowTiles;
  constexpr int kQueries = kWarps * kWarpRows;
  constexpr int kStride = D + 8;
  constexpr int kTile = kMmaKeys * kStride;  // elements of one K or V stage
  constexpr int kChunks = D / 16;
  constexpr int kDTiles = D / 8;
  constexpr int kKeyTiles = kMmaKeys / 8;
  constexpr int kVecPerRow = D / 8;  // 16-byte vectors
  extern __shared__ __align__(16) unsigned char smem[];
  T* const ks = reinterpret_cast<T*>(smem);  // [2 stages][kMmaKeys][kStride]
  T* const vs = ks + 2 * kTile;

  const AttentionBlock<T> block = AttentionBlockAt<T, D>(a, kQueries, blockIdx.x);
  const int len = block.len, q0 = block.q0;
  if (q0 >= len) return;
  const size_t ld = block.ld;
  const T* const base = block.base;
  const int hidden = a.hidden;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  // Row tile r holds rows rows[r] (fragment rows g) and rows[r] + 8.
  int rows[kRowTiles];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) rows[r] = q0 + warp * kWarpRows + 16 * r + g;
  // A warp past the sequence's end still copies tiles and meets the barriers.
  const bool active = q0 + warp * kWarpRows < len;

  // Rows past the end are zero-filled: their scores are masked to -inf, and
  // a zero V row keeps 0 * V finite.
  auto load_tile = [&](int stage, int k0) {
    T* kd = ks + stage * kTile;
    T* vd = vs + stage * kTile;
    for (int i = threadIdx.x; i < kMmaKeys * kVecPerRow; i += kThreads) {
      const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
      const bool valid = k0 + r < len;
      const T* row = base + (valid ? k0 + r : 0) * ld + c;
      CopyAsync16(kd + r * kStride + c, row + hidden, valid);
      CopyAsync16(vd + r * kStride + c, row + 2 * hidden, valid);
    }
    CopyAsyncCommit();
  };
  // MPNet's bias: this head's row of the table at distance 0.
  const float* const bias =
      a.position_bias ? a.position_bias + static_cast<size_t>(block.head) * (2 * a.bias_span - 1) +
                            a.bias_span - 1
                      : nullptr;
  const float sqrt_d = sqrtf(static_cast<float>(D));
  // A local window: only the key tiles some query of the block sees.
  const int w = a.local_window;
  const int k_begin = w ? max(0, q0 - w) : 0;
  const int k_end = w ? min(len, q0 + kQueries + w) : len;
  load_tile(0, k_begin);

  uint32_t qf[kRowTiles][kChunks][4];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) LoadQueryFragments(qf[r], base, ld, rows[r], len, t);

  float o[kRowTiles][kDTiles][4];
  // Per row tile and fragment row (g, g + 8): the running max (of unscaled
  // scores, so that scaling and subtracting it are one FMA per score) and
  // this lane's partial sum.
  float m[kRowTiles][2], l[kRowTiles][2];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
    for (int d = 0; d < kDTiles; ++d) o[r][d][0] = o[r][d][1] = o[r][d][2] = o[r][d][3] = 0.0f;
    m[r][0] = m[r][1] = -INFINITY;
    l[r][0] = l[r][1] = 0.0f;
  }

  for (int k0 = k_begin, stage = 0; k0 < k_end; k0 += kMmaKeys, stage ^= 1) {
    // The other stage was consumed before the previous iteration's last barrier.
    if (k0 + kMmaKeys < k_end) {
      load_tile(stage ^ 1, k0 + kMmaKeys);
      CopyAsyncWait<1>();  // this tile's group has landed; the next may fly
    } else {
      CopyAsyncWait<0>();
    }
    __syncthreads();
    if (active) {
      const T* kt = ks + stage * kTile;
      const T* vt = vs + stage * kTile;
      float sc[kRowTiles][kKeyTiles][4];
#pragma unroll
      for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
        for (int r = 0; r < kRowTiles; ++r)
          sc[r][j][0] = sc[r][j][1] = sc[r][j][2] = sc[r][j][3] = 0.0f;
        // Lanes 8m..8m+7 address keys 8j..8j+7 at dims 16c + 8m: b[0..1] is
        // chunk c's fragment, b[2..3] chunk c + 1's.
        const T* k_rows = kt + (8 * j + (lane & 7)) * kStride + 8 * (lane >> 3);
#pragma unroll
        for (int c = 0; c < kChunks; c += 2) {
          uint32_t b[4];
          LoadMatrixX4(b, k_rows + 16 * c);
#pragma unroll
          for (int r = 0; r < kRowTiles; ++r) {
            Mma16816(sc[r][j], qf[r][c], b, T{});
            Mma16816(sc[r][j], qf[r][c + 1], b + 2, T{});
          }
        }
      }

      if (bias) AddPositionBias(sc, k0, rows, len, bias, sqrt_d, t);
      if (k0 + kMmaKeys > len) MaskKeysPastEnd(sc, k0, len, t);  // block-uniform branch
      if (w) MaskKeysOutsideWindow(sc, k0, rows, w, t);
      float alpha[kRowTiles][2];
      OnlineSoftmaxStep(sc, m, l, alpha, scale_log2, w > 0);
      RescaleOutputs(o, alpha);

#pragma unroll
      for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
        uint32_t pa[kRowTiles][4];
#pragma unroll
        for (int r = 0; r < kRowTiles; ++r) PackProbabilities<T>(pa[r], sc[r], kk);
        // Lanes 0..15 address keys 16kk..16kk+15 at dims 8d, lanes 16..31
        // the same keys at dims 8(d + 1): b[0..1] is tile d's fragment,
        // b[2..3] tile d + 1's.
        const T* v_rows = vt + (16 * kk + (lane & 15)) * kStride + 8 * (lane >> 4);
#pragma unroll
        for (int d = 0; d < kDTiles; d += 2) {
          uint32_t b[4];
          LoadMatrixX4Transposed(b, v_rows + 8 * d);
#pragma unroll
          for (int r = 0; r < kRowTiles; ++r) {
            Mma16816(o[r][d], pa[r], b, T{});
            Mma16816(o[r][d + 1], pa[r], b + 2, T{});
          }
        }
      }
    }
    __syncthreads();  // this stage is consumed before the next iteration refills it
  }
  if (!active) return;

#pragma unroll
  for (int r = 0; r < kRowTiles; ++r)
    StoreOutputRows(block.out, hidden, o[r], l[r], rows[r], len, t);
#endif
}

}  // namespace bertrt::cuda

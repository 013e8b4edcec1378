// Variable-length attention on tensor cores (fp16/bf16, head dims 32/64/128),
// flash-attention style: one block of 4 warps per (sequence, head, 64
// queries); each warp owns 16 query rows, streams 64-key tiles of K and V
// through shared memory and keeps the softmax running max and sum in fp32
// registers, so the [len, len] score matrix never exists in memory.
//
// Fragment layouts are those of PTX mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8):  b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C (16x8):  c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
// so the score accumulators of two adjacent key tiles are exactly the A
// fragment of P for the P V product, with no trip through shared memory; V's
// B fragments come from shared memory through ldmatrix.trans.
#pragma once

#include <cstdint>

#include "backends/cuda/device_util.cuh"
#include "backends/cuda/kernels.h"

namespace bertrt::cuda {

constexpr int kMmaQueries = 64;  // per block: 4 warps x 16 rows
constexpr int kMmaKeys = 64;     // per shared-memory tile
constexpr int kMmaThreads = 128;

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

// The B fragment of m16n8k16 from a 16x8 tile of a row-major [k][n] matrix in
// shared memory, transposed on the way by ldmatrix: lanes 0..15 give the
// addresses of rows k = 0..15 (8 contiguous n each, 16-byte aligned); b[0]
// gets (k 2t..2t+1, n g) and b[1] (k 2t+8..2t+9, n g). One instruction in
// place of four 16-bit loads and two packs.
__device__ __forceinline__ void LoadBTransposed(uint32_t* b, const void* row) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(addr));
}

// scale_log2 = log2(e) / sqrt(D): the softmax runs in base 2 (exp2f).
template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads) AttentionMmaKernel(AttentionArgs a,
                                                                  float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kStride = D + 8;  // 16-byte pad: conflict-free fragment loads
  constexpr int kChunks = D / 16;
  constexpr int kDTiles = D / 8;
  constexpr int kKeyTiles = kMmaKeys / 8;
  constexpr int kVecPerRow = D / 8;  // 16-byte vectors
  __shared__ __align__(16) T ks[kMmaKeys * kStride];
  __shared__ __align__(16) T vs[kMmaKeys * kStride];

  const int s = blockIdx.x, head = blockIdx.y;
  const int begin = a.cu_seqlens[s], len = a.cu_seqlens[s + 1] - begin;
  const int q0 = blockIdx.z * kMmaQueries;
  if (q0 >= len) return;
  const int hidden = a.hidden;
  const size_t ld = 3 * static_cast<size_t>(hidden);
  const T* base = static_cast<const T*>(a.qkv) + begin * ld + head * D;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;

  uint32_t qf[kChunks][4];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const T* q0p = base + r0 * ld + 16 * c + 2 * t;
    const T* q1p = base + r1 * ld + 16 * c + 2 * t;
    qf[c][0] = r0 < len ? Load32(q0p) : 0u;
    qf[c][1] = r1 < len ? Load32(q1p) : 0u;
    qf[c][2] = r0 < len ? Load32(q0p + 8) : 0u;
    qf[c][3] = r1 < len ? Load32(q1p + 8) : 0u;
  }

  float o[kDTiles][4];
#pragma unroll
  for (int d = 0; d < kDTiles; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  for (int k0 = 0; k0 < len; k0 += kMmaKeys) {
    __syncthreads();  // the previous tile is consumed
    for (int i = threadIdx.x; i < kMmaKeys * kVecPerRow; i += kMmaThreads) {
      const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (k0 + r < len) {
        const T* row = base + (k0 + r) * ld + c;
        kv = *reinterpret_cast<const uint4*>(row + hidden);
        vv = *reinterpret_cast<const uint4*>(row + 2 * hidden);
      }
      *reinterpret_cast<uint4*>(&ks[r * kStride + c]) = kv;
      *reinterpret_cast<uint4*>(&vs[r * kStride + c]) = vv;
    }
    __syncthreads();

    float sc[kKeyTiles][4];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const T* kp = &ks[(8 * j + g) * kStride + 16 * c + 2 * t];
        const uint32_t b[2] = {Load32(kp), Load32(kp + 8)};
        Mma16816(sc[j], qf[c], b, T{});
      }
    }

    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = k0 + 8 * j + 2 * t + e < len;
        sc[j][e] = valid ? sc[j][e] * scale_log2 : -INFINITY;
        sc[j][2 + e] = valid ? sc[j][2 + e] * scale_log2 : -INFINITY;
        mx0 = fmaxf(mx0, sc[j][e]);
        mx1 = fmaxf(mx1, sc[j][2 + e]);
      }
    }
    // A row's 8-key slices live in the 4 lanes of one group.
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // The tile holds at least one valid key, so mx0/mx1 are finite.
    const float alpha0 = exp2f(m0 - mx0), alpha1 = exp2f(m1 - mx1);
    m0 = mx0;
    m1 = mx1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[j][e] = exp2f(sc[j][e] - m0);
        sc[j][2 + e] = exp2f(sc[j][2 + e] - m1);
        sum0 += sc[j][e];
        sum1 += sc[j][2 + e];
      }
    }
    // Partial sums per lane; alpha is uniform along a row, so the lanes'
    // partials are reduced once at the end.
    l0 = l0 * alpha0 + sum0;
    l1 = l1 * alpha1 + sum1;
#pragma unroll
    for (int d = 0; d < kDTiles; ++d) {
      o[d][0] *= alpha0;
      o[d][1] *= alpha0;
      o[d][2] *= alpha1;
      o[d][3] *= alpha1;
    }

#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      const uint32_t pa[4] = {PackFloats(sc[2 * kk][0], sc[2 * kk][1], T{}),
                              PackFloats(sc[2 * kk][2], sc[2 * kk][3], T{}),
                              PackFloats(sc[2 * kk + 1][0], sc[2 * kk + 1][1], T{}),
                              PackFloats(sc[2 * kk + 1][2], sc[2 * kk + 1][3], T{})};
      const T* v_rows = &vs[(16 * kk + (lane & 15)) * kStride];
#pragma unroll
      for (int d = 0; d < kDTiles; ++d) {
        uint32_t b[2];
        LoadBTransposed(b, v_rows + 8 * d);
        Mma16816(o[d], pa, b, T{});
      }
    }
  }

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  T* out = static_cast<T*>(a.ctx) + static_cast<size_t>(begin) * hidden + head * D + 2 * t;
#pragma unroll
  for (int d = 0; d < kDTiles; ++d) {
    if (r0 < len)
      *reinterpret_cast<uint32_t*>(out + static_cast<size_t>(r0) * hidden + 8 * d) =
          PackFloats(o[d][0] * inv0, o[d][1] * inv0, T{});
    if (r1 < len)
      *reinterpret_cast<uint32_t*>(out + static_cast<size_t>(r1) * hidden + 8 * d) =
          PackFloats(o[d][2] * inv1, o[d][3] * inv1, T{});
  }
#endif
}

}  // namespace bertrt::cuda

// A persistent stream-K GEMM of our own for Hopper, for the probe next to it
// (streamk_gemm_probe.cu): TMA, a producer thread and two consumer
// warpgroups on wgmma, every block given the same share of the GEMM's K
// iterations. Tilings (Config): 128 rows x 128 or 256 columns shared by both
// consumers (64 rows each), 256 x 128 shared (128 rows each), or ping-pong
// (each consumer its own 128 x 128 tile, one's epilogue under the other's
// products); clusters of 1 or 2 along M, the W slice multicast to both; the
// epilogue staged through shared memory or (128-row consumers) stored by TMA.
//
// Why it exists: the ragged batch's GEMMs (~2,400 rows) ran through cuBLASLt
// at 450-530 TFLOP/s against 530-680 at 4,096 rows; at 2,432 rows a 128 x
// 128 tiling of BERT-base's 768-wide outputs is 114 tiles for 132
// multiprocessors. Why it is not in the engine: it is still slower than
// cuBLASLt at every BERT-base shape (0.4-1.00x; bench/RESULTS.md, 2026-11-30,
// "A stream-K GEMM of our own"). With ping-pong and the TMA-store epilogue
// the consumers alone (Config::kCeiling, no copies) beat it by 0-16%, so the
// copies are what is missing: neither W multicast nor 256 x 128 tiles (fewer
// bytes per product) recovered them; a deeper ring recovered part (3 -> 5: 16,384-
// row qkv 126 -> 110 us), and a 6th slot (64-column out tiles) nothing more.
//
// How it works. One thread of the first warpgroup issues the TMA copies of
// 64-deep K slices of x (the tile's rows) and W (its columns) into a kStages
// ring of shared memory (128-byte swizzle, the layout wgmma reads); the other
// two warpgroups multiply them (both operands from shared memory): half the
// rows each of every tile, or under ping-pong every other tile each, their
// mainloops taking turns (an mbarrier per warpgroup). Full and empty
// mbarriers pass each slot between producer and consumers, so copies run
// ahead across tile boundaries too. The work is the GEMM's K iterations
// over all its (cluster) tiles; cluster c takes iterations [c T / G,
// (c + 1) T / G) of T for G clusters. A tile cut by share boundaries has
// several contributors (consecutive clusters): each writes its fp32 partial
// to the workspace and counts itself in on the tile's counter; the one that
// arrives last adds all partials in cluster order (the same bits every run)
// and writes the tile. Nobody waits for anybody, so it cannot deadlock
// against other work on the GPU. Each cluster's first and last units are
// the only ones that can be cut, hence two partial slots per block.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "backends/cuda/gemm/epilogue.h"
#include "backends/cuda/ops/attention_wgmma.cuh"
#include "backends/cuda/ops/launch.h"
#include "backends/cuda/util/cuda_check.h"
#include "backends/cuda/util/device_util.cuh"
#include "backends/cuda/util/tma.cuh"
#include "backends/cuda/util/wgmma.cuh"

namespace bertrt::cuda {
namespace {

struct StreamKGemmArgs {
  const void* x;  // [rows, in], 16-byte aligned rows
  int rows, in;
  const void* w;     // [out, in], HF's layout
  const void* bias;  // [out] or null
  int out;
  Epilogue epilogue;
  const void* residual;  // [rows, out] or null
  void* y;               // [rows, out]; may not alias x or residual
  // Blocks that take a share (fewer where fewer clusters fit at once).
  int ctas;
  // StreamKWorkspaceBytes() bytes, zeroed once when allocated: the kernel
  // leaves its tile counters at zero again when it ends.
  void* workspace;
};

// Rows of a warpgroup's out tile (kTmaStore) and of the TMA-store boxes.
constexpr int kOutRows = 128;
constexpr int kTileK = 64;  // K per slice: one 128-byte swizzle line of 16-bit elements
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
// The epilogue goes through shared memory kChunk columns at a time, so that
// rows leave in whole 64-byte pieces: floats per staged row (padded so that
// a warp's fragment stores spread over the banks).
constexpr int kChunk = 32;
constexpr int kStagingStride = kChunk + 4;
constexpr int kSlots = 2;
// The most blocks a launch takes: the workspace's counters are laid out for it.
constexpr int kMaxCtas = 256;
// The widest tile: the workspace's partial tiles are sized for it.
constexpr int kMaxTileN = 256;

// Tiles of kTileM x kTileN, in clusters of kClusterM tiles along M that
// share (multicast) their W slices.
template <int kTileN_, int kClusterM_, bool kPingPong_ = false, bool kTmaStore_ = false,
          bool kCeiling_ = false, int kTileM_ = 128, int kStages_ = 0, int kOutCols_ = 128>
struct Config {
  // kTmaStore: columns of a warpgroup's out tile. 64 stores a tile in two
  // passes and leaves shared memory for a deeper ring.
  static constexpr int kOutCols = kOutCols_;
  static_assert(kOutCols == 64 || kOutCols == 128, "out tiles of 64 or 128 columns");
  // Rows per block tile: 128 (64 per consumer, or 128 each under ping-pong)
  // or 256 (128 per consumer, both on every tile).
  static constexpr int kTileM = kTileM_;
  static_assert(kTileM == 128 || kTileM == 256, "128- or 256-row tiles");
  // 128-row consumers only: the epilogue writes the finished tile into shared memory
  // (the residual tile, brought there by TMA while the tile is multiplied,
  // is read and overwritten in place) and one thread stores it with TMA.
  static constexpr bool kTmaStore = kTmaStore_;
  // A measurement, not a GEMM: after the ring's first fill the producer
  // marks slots full without copying, so the consumers multiply stale slices
  // at the rate their own loop allows (the output is wrong).
  static constexpr bool kCeiling = kCeiling_;
  static constexpr int kTileN = kTileN_;
  static constexpr int kClusterM = kClusterM_;
  // Ping-pong: each consumer warpgroup takes every other unit, all 128 rows
  // of its tile, so that one's epilogue runs under the other's products.
  // Otherwise both take each unit, half its rows each.
  static constexpr bool kPingPong = kPingPong_;
  static_assert(!(kPingPong && kTileM == 256), "ping-pong tiles are 128 rows");
  static constexpr int kRowBlocks = kPingPong || kTileM == 256 ? 2 : 1;  // of 64 rows per consumer
  static_assert(kRowBlocks == 1 || kTileN == 128, "a consumer holds at most 128 x 128");
  static_assert(!kTmaStore || kRowBlocks == 2, "the TMA-store epilogue stores 128-row tiles");
  static constexpr int kAccumulators = kRowBlocks * kTileN / 2;  // fp32 per consumer thread
  // Ring slots: as many as shared memory holds, or kStages_ where given.
  static constexpr int kStages = kStages_                       ? kStages_
                                 : kTileM == 256                ? 3
                                 : kTmaStore && kOutCols == 128 ? 5
                                 : kTileN == 128                ? 6
                                                                : 4;
  static constexpr size_t kSliceA = size_t{kTileM} * kTileK;  // elements
  static constexpr size_t kSliceB = size_t{kTileN} * kTileK;
  static constexpr size_t kRingBytes = kStages * (kSliceA + kSliceB) * 2;
  static constexpr size_t kOutBytes = kTmaStore ? size_t{kConsumers} * kOutRows * kOutCols * 2 : 0;
  static constexpr size_t kStagingBytes =
      kTmaStore ? 0 : size_t{kConsumers} * 64 * kStagingStride * 4;
  static constexpr size_t kBiasBytes = size_t{kConsumers} * kTileN * 4;
  static constexpr size_t kBarrierBytes = (2 * kStages + 2 * kConsumers) * 8 + kConsumers * 4;
  // Plus room to align the ring to 1,024 bytes (a swizzle pattern's period).
  static constexpr size_t kSmemBytes =
      kRingBytes + kOutBytes + kStagingBytes + kBiasBytes + kBarrierBytes + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than a Hopper block has");
};

// Partial-tile floats per (block, slot, consumer): each consumer thread's
// accumulators, thread-minor so that a warp's stores are contiguous.
constexpr size_t kPartialFloats = size_t{kMaxTileN / 2} * 128;

template <typename T>
struct alignas(2 * sizeof(T)) Vec2 {
  T v[2];
};

// The split of the GEMM's iterations into shares, one per cluster: a unit of
// work is a cluster tile (kClusterM tiles along M) over some K iterations.
struct Schedule {
  int row_groups, k_iters, clusters;
  long long total;  // cluster tiles x k_iters
  __host__ __device__ long long Start(int c) const { return total * c / clusters; }
  // The cluster whose share holds iteration `it`.
  __device__ int Owner(long long it) const {
    return static_cast<int>(((it + 1) * clusters - 1) / total);
  }
};

template <typename C>
Schedule ScheduleOf(int rows, int in, int out, int ctas) {
  Schedule s{};
  const int row_tiles = (rows + C::kTileM - 1) / C::kTileM;
  s.row_groups = (row_tiles + C::kClusterM - 1) / C::kClusterM;
  s.k_iters = in / kTileK;
  s.total = static_cast<long long>(s.row_groups) * (out / C::kTileN) * s.k_iters;
  s.clusters = static_cast<int>(std::min<long long>(std::max(ctas / C::kClusterM, 1), s.total));
  return s;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Arrives on the barrier at the same place in block `cta` of the cluster.
__device__ __forceinline__ void BarrierArriveIn(uint64_t* bar, uint32_t cta) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(SmemAddress(bar)), "r"(cta));
  // Release at CTA scope, as CUTLASS's cluster barriers arrive: cluster scope
  // made every consumer warp wait for its wgmma in flight (128 x 128 tiles
  // without a cluster, arriving this way on their own barriers: 1.5x slower).
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void TmaLoadMulticast(void* dst, const CUtensorMap* map, int x, int y,
                                                 uint64_t* bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(SmemAddress(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(SmemAddress(bar)), "r"(x), "r"(y), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
#endif

template <typename T, typename C, Epilogue kEpilogue>
__global__ void __launch_bounds__(kThreads, 1)
    StreamKGemmKernel(const __grid_constant__ CUtensorMap map_x,
                      const __grid_constant__ CUtensorMap map_w,
                      const __grid_constant__ CUtensorMap map_residual,
                      const __grid_constant__ CUtensorMap map_y, StreamKGemmArgs a, Schedule s) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kTileN = C::kTileN, kClusterM = C::kClusterM, kStages = C::kStages;
  constexpr size_t kSliceA = C::kSliceA, kSliceB = C::kSliceB;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
  T* const as = reinterpret_cast<T*>(smem);  // [kStages][kSliceA]
  T* const bs = as + kStages * kSliceA;      // [kStages][kSliceB]
  T* const outs = bs + kStages * kSliceB;    // [kConsumers][kOutRows * kTileN] (kTmaStore)
  float* const staging =
      reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(outs) + C::kOutBytes);
  float* const biases = staging + C::kStagingBytes / 4;  // [kConsumers][kTileN]
  uint64_t* const full = reinterpret_cast<uint64_t*>(biases + kConsumers * kTileN);
  uint64_t* const empty = full + kStages;
  // Ping-pong: consumer w's mainloop of a unit is done (lane 0 of each warp).
  uint64_t* const ordered = empty + kStages;           // [kConsumers]
  uint64_t* const residual_in = ordered + kConsumers;  // [kConsumers] (kTmaStore)
  int* const finishes = reinterpret_cast<int*>(residual_in + kConsumers);  // [kConsumers]
  const int cluster = blockIdx.x / kClusterM, rank = blockIdx.x % kClusterM;

  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      BarrierInit(&full[i], 1);
      // Lane 0 of every consumer warp of every block the slot's copies go to.
      BarrierInit(&empty[i], (C::kPingPong ? 4 : kConsumers * 4) * kClusterM);
    }
    for (int i = 0; i < kConsumers; ++i)
      BarrierInit(&ordered[i], 4), BarrierInit(&residual_in[i], 1);
    FenceBarrierInit();
  }
  if constexpr (kClusterM > 1)
    ClusterSync();  // no block copies or arrives into another before its barriers exist
  else
    __syncthreads();
  AfterPreviousKernel();

  const long long begin = s.Start(cluster), end = s.Start(cluster + 1);
  // The units of this cluster's share: (tile, first and end K iteration).
  struct Unit {
    int m0, n0, tile, k0, k1;
  };
  auto unit_at = [&](long long it) {
    const int tile = static_cast<int>(it / s.k_iters);
    const int k0 = static_cast<int>(it - static_cast<long long>(tile) * s.k_iters);
    const long long left = end - it;
    const int k1 = left < s.k_iters - k0 ? k0 + static_cast<int>(left) : s.k_iters;
    return Unit{((tile % s.row_groups) * kClusterM + rank) * C::kTileM,
                (tile / s.row_groups) * kTileN, tile, k0, k1};
  };
  const int warpgroup = threadIdx.x / 128;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      int filled = 0;
      for (long long it = begin; it < end;) {
        const Unit u = unit_at(it);
        for (int k = u.k0; k < u.k1; ++k) {
          BarrierWait(&empty[stage], phase ^ 1);  // every block is done with the slot
          if (C::kCeiling && filled++ >= kStages) {
            BarrierArriveExpect(&full[stage], 0);
            if (++stage == kStages) stage = 0, phase ^= 1;
            continue;
          }
          BarrierArriveExpect(&full[stage], (kSliceA + kSliceB) * sizeof(T));
          TmaLoad(as + stage * kSliceA, &map_x, k * kTileK, u.m0, &full[stage]);
          if constexpr (kClusterM == 1) {
            TmaLoad(bs + stage * kSliceB, &map_w, k * kTileK, u.n0, &full[stage]);
          } else {
            // This block's share of the W slice, to every block of the cluster.
            constexpr int kShare = kTileN / kClusterM;
            TmaLoadMulticast(bs + stage * kSliceB + rank * kShare * kTileK, &map_w, k * kTileK,
                             u.n0 + rank * kShare, &full[stage], (1 << kClusterM) - 1);
          }
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
        it += u.k1 - u.k0;
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int consumer = warpgroup - 1, t = threadIdx.x % 128;
    // Which piece of a tile's partial this warpgroup holds.
    const int piece = C::kPingPong ? 0 : consumer;
    const int warp = t / 32, lane = t % 32;
    float* const stage_out = staging + consumer * 64 * kStagingStride;
    float* const bias_out = biases + consumer * kTileN;
    int* const counters = static_cast<int*>(a.workspace);  // [kMaxCtas][kConsumers]
    float* const partials = reinterpret_cast<float*>(counters + kMaxCtas * kConsumers);
    // Block `cta`'s partial in `slot`, this thread's first float.
    auto partial = [&](int cta, int slot) {
      return partials +
             ((static_cast<size_t>(cta) * kSlots + slot) * kConsumers + piece) * kPartialFloats + t;
    };
    auto release = [&](int slot) {
      if (lane != 0) return;
      BarrierArrive(&empty[slot]);
      for (int c = 0; c < kClusterM; ++c)
        if (c != rank) BarrierArriveIn(&empty[slot], c);
    };

    int stage = 0;
    uint32_t phase = 0;
    float blocks[C::kRowBlocks][kTileN / 2];
    float* const acc = &blocks[0][0];
    int unit = 0;
    uint32_t order_phase = 0, residual_phase = 0;
    T* const out_tile = outs + consumer * kOutRows * C::kOutCols;
    // The rows of the block's tile this warpgroup multiplies.
    const int first_row = C::kPingPong ? 0 : consumer * C::kRowBlocks * 64;
    const bool tma_residual = C::kTmaStore && a.residual;
    for (long long it = begin; it < end;) {
      const Unit u = unit_at(it);
      it += u.k1 - u.k0;
      if (C::kPingPong && unit++ % kConsumers != consumer) {
        // The other warpgroup's unit: its slices pass this one by.
        for (int k = u.k0; k < u.k1; ++k)
          if (++stage == kStages) stage = 0, phase ^= 1;
        continue;
      }
      // Ping-pong: the other warpgroup's unit before this one has been
      // multiplied, so every slot this one waits on holds the fill it expects
      // (a parity wait cannot tell fills two rounds apart).
      if (C::kPingPong && unit > 1) {
        BarrierWait(&ordered[1 - consumer], order_phase);
        order_phase ^= 1;
      }
      if (C::kTmaStore && t == 0) {
        // The previous tile's store has read the out tile; the residual
        // tile (its first pass) takes its place while this one is multiplied.
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
        if (tma_residual) {
          BarrierArriveExpect(&residual_in[consumer], kOutRows * C::kOutCols * sizeof(T));
          for (int box = 0; box < C::kOutCols / 64; ++box)
            TmaLoad(out_tile + box * kOutRows * 64, &map_residual, u.n0 + 64 * box,
                    u.m0 + first_row, &residual_in[consumer]);
        }
      }
#pragma unroll
      for (int i = 0; i < C::kAccumulators; ++i) acc[i] = 0.0f;
      int previous = -1;
      for (int k = u.k0; k < u.k1; ++k) {
        BarrierWait(&full[stage], phase);
        const T* const sa = as + stage * kSliceA + first_row * kTileK;
        const T* const sb = bs + stage * kSliceB;
#pragma unroll
        for (int b = 0; b < C::kRowBlocks; ++b) PinRegisters(blocks[b]);
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kTileK / 16; ++kk)
#pragma unroll
          for (int b = 0; b < C::kRowBlocks; ++b)
            WgmmaSS(blocks[b], SmemDescriptor(sa + b * 64 * kTileK + 16 * kk, 16, 1024, 1),
                    SmemDescriptor(sb + 16 * kk, 16, 1024, 1), T{});
        WgmmaCommit();
        // The previous slice's products are done: its slot may be refilled.
        WgmmaWait<1>();
#pragma unroll
        for (int b = 0; b < C::kRowBlocks; ++b) PinRegisters(blocks[b]);
        if (previous >= 0) release(previous);
        previous = stage;
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
      if (C::kPingPong && lane == 0) BarrierArrive(&ordered[consumer]);
      WgmmaWait<0>();
#pragma unroll
      for (int b = 0; b < C::kRowBlocks; ++b) PinRegisters(blocks[b]);
      release(previous);

      if (u.k0 != 0 || u.k1 != s.k_iters) {
        // A cut tile: leave the partial, count in; the last contributor goes on.
        const long long first = static_cast<long long>(u.tile) * s.k_iters;
        const int lo = s.Owner(first), hi = s.Owner(first + s.k_iters - 1);
        auto slot_of = [&](int c) { return s.Start(c) >= first ? 0 : 1; };
        float* const mine = partial(blockIdx.x, slot_of(cluster));
#pragma unroll
        for (int i = 0; i < C::kAccumulators; ++i) __stcg(mine + i * 128, acc[i]);
        __threadfence();
        NamedBarrier(1 + consumer, 128);
        if (t == 0) {
          int* const counter = counters + (lo * kClusterM + rank) * kConsumers + piece;
          const bool last = atomicAdd(counter, 1) == hi - lo;
          if (last) *counter = 0;  // for the next launch
          finishes[consumer] = last;
        }
        NamedBarrier(1 + consumer, 128);
        if (!finishes[consumer]) {
          if (tma_residual) {
            BarrierWait(&residual_in[consumer], residual_phase);  // unused, but its phase passes
            residual_phase ^= 1;
          }
          continue;
        }
        __threadfence();
        // In cluster order, whoever is last: the same sum every run.
#pragma unroll
        for (int i = 0; i < C::kAccumulators; ++i) acc[i] = 0.0f;
        for (int q = lo; q <= hi; ++q) {
          const float* const p = partial(q * kClusterM + rank, slot_of(q));
#pragma unroll
          for (int i = 0; i < C::kAccumulators; ++i) acc[i] += __ldcg(p + i * 128);
        }
      }

      if constexpr (C::kTmaStore) {
        // Into the out tile in TMA's 128-byte-swizzled layout (boxes of 64
        // columns; 16-byte chunk j of row r at j ^ (r % 8), which spreads a
        // warp's stores over all banks), then one TMA store per box; rows
        // past the end are not written.
        NamedBarrier(1 + consumer, 128);  // the previous tile's epilogue is done with the bias
        for (int c = t; c < kTileN; c += 128)
          bias_out[c] = a.bias ? ToFloat(static_cast<const T*>(a.bias)[u.n0 + c]) : 0.0f;
        NamedBarrier(1 + consumer, 128);
        unsigned char* const tile_bytes = reinterpret_cast<unsigned char*>(out_tile);
        const int g = lane / 4, q = lane % 4;
#pragma unroll
        for (int pass = 0; pass < kTileN / C::kOutCols; ++pass) {
          const int c0 = pass * C::kOutCols;  // the pass's first column in the tile
          if (pass > 0) {
            // The previous pass's store has read the out tile: this pass's
            // residual takes its place (its latency is exposed here).
            if (t == 0) {
              asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
              if (tma_residual) {
                BarrierArriveExpect(&residual_in[consumer], kOutRows * C::kOutCols * sizeof(T));
                for (int box = 0; box < C::kOutCols / 64; ++box)
                  TmaLoad(out_tile + box * kOutRows * 64, &map_residual, u.n0 + c0 + 64 * box,
                          u.m0 + first_row, &residual_in[consumer]);
              }
            }
            NamedBarrier(1 + consumer, 128);
          }
          if (tma_residual) {
            BarrierWait(&residual_in[consumer], residual_phase);
            residual_phase ^= 1;
          }
#pragma unroll
          for (int b = 0; b < C::kRowBlocks; ++b)
#pragma unroll
            for (int j = 0; j < C::kOutCols / 8; ++j) {
              const int i = c0 / 8 + j;  // the 8-column group in the tile
              const float2 bias = *reinterpret_cast<const float2*>(bias_out + 8 * i + 2 * q);
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int r = b * 64 + warp * 16 + g + 8 * h;
                const int at = (j / 8) * kOutRows * 128 + r * 128 + (((j % 8) ^ g) << 4) + 4 * q;
                Vec2<T>* const p = reinterpret_cast<Vec2<T>*>(tile_bytes + at);
                float v0 = blocks[b][4 * i + 2 * h] + bias.x,
                      v1 = blocks[b][4 * i + 2 * h + 1] + bias.y;
                if (tma_residual) {
                  const Vec2<T> res = *p;
                  v0 += ToFloat(res.v[0]), v1 += ToFloat(res.v[1]);
                }
                Vec2<T> o;
                o.v[0] = FromFloat<T>(Activate<kEpilogue>(v0));
                o.v[1] = FromFloat<T>(Activate<kEpilogue>(v1));
                *p = o;
              }
            }
          FenceSharedForAsyncProxy();
          NamedBarrier(1 + consumer, 128);
          if (t == 0) {
            for (int box = 0; box < C::kOutCols / 64; ++box)
              asm volatile(
                  "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::
                      "l"(reinterpret_cast<uint64_t>(&map_y)),
                  "r"(SmemAddress(out_tile + box * kOutRows * 64)), "r"(u.n0 + c0 + 64 * box),
                  "r"(u.m0 + first_row)
                  : "memory");
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
          }
        }
        continue;
      }
      // Epilogue, kChunk columns at a time: fragments to shared memory, then
      // each row's kChunk columns out 4 elements per thread, with bias,
      // residual and activation. The tile's bias is read once, into shared
      // memory, and each chunk's residual is on its way while the chunk
      // before it is written: a chunk then waits for no global load.
      constexpr int kRowThreads = kChunk / 4;
      constexpr int kPerThread = 64 * kRowThreads / 128;  // vectors per chunk
      const int row = warp * 16 + lane / 4, col = 2 * (lane % 4);
      NamedBarrier(1 + consumer, 128);  // the previous tile's epilogue is done with the bias
      for (int c = t; c < kTileN; c += 128)
        bias_out[c] = a.bias ? ToFloat(static_cast<const T*>(a.bias)[u.n0 + c]) : 0.0f;
#pragma unroll
      for (int b = 0; b < C::kRowBlocks; ++b) {
        const int m0 = u.m0 + first_row + b * 64;
        const int rows_left = a.rows - m0;
        const T* const residual = static_cast<const T*>(a.residual);
        // Vector j of this thread in a chunk: its row, and its column in the chunk.
        auto vec_row = [&](int j) { return (t + 128 * j) / kRowThreads; };
        auto vec_col = [&](int j) { return (t + 128 * j) % kRowThreads * 4; };
        auto at = [&](int j, int chunk) {
          return static_cast<size_t>(m0 + vec_row(j)) * a.out + u.n0 + chunk * kChunk + vec_col(j);
        };
        Vec4<T> res_next[kPerThread] = {};
        auto load_residual = [&](int chunk) {
#pragma unroll
          for (int j = 0; j < kPerThread; ++j)
            if (residual && vec_row(j) < rows_left)
              res_next[j] = *reinterpret_cast<const Vec4<T>*>(residual + at(j, chunk));
        };
        load_residual(0);
#pragma unroll
        for (int chunk = 0; chunk < kTileN / kChunk; ++chunk) {
          Vec4<T> res[kPerThread];
#pragma unroll
          for (int j = 0; j < kPerThread; ++j) res[j] = res_next[j];
          if (chunk + 1 < kTileN / kChunk) load_residual(chunk + 1);
          NamedBarrier(1 + consumer, 128);  // the previous chunk has been read out
#pragma unroll
          for (int i = 0; i < kChunk / 8; ++i) {
            const float* const d = blocks[b] + 4 * (chunk * kChunk / 8 + i);
            *reinterpret_cast<float2*>(stage_out + row * kStagingStride + 8 * i + col) =
                make_float2(d[0], d[1]);
            *reinterpret_cast<float2*>(stage_out + (row + 8) * kStagingStride + 8 * i + col) =
                make_float2(d[2], d[3]);
          }
          NamedBarrier(1 + consumer, 128);
#pragma unroll
          for (int j = 0; j < kPerThread; ++j) {
            const int r = vec_row(j), c = vec_col(j);
            if (r >= rows_left) break;
            const float4 sum = *reinterpret_cast<const float4*>(stage_out + r * kStagingStride + c);
            const float4 b = *reinterpret_cast<const float4*>(bias_out + chunk * kChunk + c);
            float v[4] = {sum.x + b.x, sum.y + b.y, sum.z + b.z, sum.w + b.w};
            if (residual)
#pragma unroll
              for (int e = 0; e < 4; ++e) v[e] += ToFloat(res[j].v[e]);
            Vec4<T> out;
#pragma unroll
            for (int e = 0; e < 4; ++e) out.v[e] = FromFloat<T>(Activate<kEpilogue>(v[e]));
            *reinterpret_cast<Vec4<T>*>(static_cast<T*>(a.y) + at(j, chunk)) = out;
          }
        }
      }
    }
  }
  // The out tiles' last stores have completed before the block's shared
  // memory goes away.
  if (C::kTmaStore && threadIdx.x % 128 == 0)
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  // No block leaves while another may still copy into it or arrive on its
  // barriers.
  if constexpr (kClusterM > 1) {
    __syncwarp();
    ClusterSync();
  }
#else
  AfterPreviousKernel();
#endif
}

// A [rows, cols] row-major matrix read in boxes of box_rows x 64 elements,
// 128-byte swizzled.
template <typename T>
StatusOr<CUtensorMap> TensorMap(const void* base, int rows, int cols, int box_rows) {
  return TensorMap2D<T>(base, rows, cols, cols, box_rows, kTileK, CU_TENSOR_MAP_SWIZZLE_128B);
}

// How many clusters of `cluster` blocks of `kernel` (`smem` bytes of shared
// memory each) the current GPU holds at once: a share whose cluster found no
// room would run after the others, doubling the GEMM's time. Cached per GPU
// and kernel; a miss also lifts the kernel's shared memory limit on this GPU.
StatusOr<int> ActiveClusters(const void* kernel, int cluster, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, int> cache;
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::lock_guard lock(mu);
  if (auto it = cache.find({device, kernel}); it != cache.end()) return it->second;
  CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(cluster);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  if (clusters < 1) return Internal("stream-K GEMM: no cluster of its blocks fits this GPU");
  return cache[{device, kernel}] = clusters;
}

template <typename T, typename C, Epilogue kEpilogue>
Status LaunchFor(const StreamKGemmArgs& a, Stream stream) {
  auto* const kernel = StreamKGemmKernel<T, C, kEpilogue>;
  ASSIGN_OR_RETURN(const int active, ActiveClusters(reinterpret_cast<const void*>(kernel),
                                                    C::kClusterM, C::kSmemBytes));
  ASSIGN_OR_RETURN(const CUtensorMap map_x, TensorMap<T>(a.x, a.rows, a.in, C::kTileM));
  ASSIGN_OR_RETURN(const CUtensorMap map_w,
                   TensorMap<T>(a.w, a.out, a.in, C::kTileN / C::kClusterM));
  // The epilogue's tensors, in boxes of 128 rows x 64 columns (kTmaStore).
  ASSIGN_OR_RETURN(const CUtensorMap map_y, TensorMap<T>(a.y, a.rows, a.out, kOutRows));
  ASSIGN_OR_RETURN(const CUtensorMap map_residual,
                   TensorMap<T>(a.residual ? a.residual : a.y, a.rows, a.out, kOutRows));
  const Schedule s = ScheduleOf<C>(a.rows, a.in, a.out, std::min(a.ctas, active * C::kClusterM));
  cudaLaunchAttribute attrs[2] = {};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = C::kClusterM;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(s.clusters * C::kClusterM);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = C::kSmemBytes;
  config.stream = stream.handle;
  config.attrs = attrs;
  config.numAttrs = stream.overlap_launch ? 2 : 1;
  CUDA_RETURN_IF_ERROR(
      cudaLaunchKernelEx(&config, kernel, map_x, map_w, map_residual, map_y, a, s));
  return Status::Ok();
}

template <typename T, typename C>
Status LaunchForType(const StreamKGemmArgs& a, Stream stream) {
  switch (a.epilogue) {
    case Epilogue::kBias:
      return LaunchFor<T, C, Epilogue::kBias>(a, stream);
    case Epilogue::kBiasGeluTanh:
      return LaunchFor<T, C, Epilogue::kBiasGeluTanh>(a, stream);
    case Epilogue::kBiasRelu:
      return LaunchFor<T, C, Epilogue::kBiasRelu>(a, stream);
  }
  return Internal("stream-K GEMM: unknown epilogue");
}

// Workspace bytes: tile counters and fp32 partial tiles for kMaxCtas blocks.
size_t StreamKWorkspaceBytes() {
  return size_t{kMaxCtas} * kConsumers * sizeof(int) +
         size_t{kMaxCtas} * kSlots * kConsumers * kPartialFloats * sizeof(float);
}

}  // namespace
}  // namespace bertrt::cuda

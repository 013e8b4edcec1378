// Variable-length attention with a TMA producer and wgmma consumers (sm_90a,
// fp16/bf16, head dims 32/64/128): flash attention 3's warp specialization
// on attention_wgmma.cuh's flash-attention loop.
//
// Why: the wgmma kernel (all threads copy K/V with cp.async, block barriers
// twice per 64-key tile) ran BERT-large's attention latency-bound on the
// H200: tensor pipe ~24% busy, 0.99 eligible warps of 3.8, cp.async address
// arithmetic and barrier stalls among the top costs (bench/RESULTS.md,
// 2026-11-30). Here:
// - one producer thread copies Q and 128-key K/V tiles by TMA into a ring of
//   shared memory, running ahead of the consumers by the ring's depth and
//   across work units, so that a unit's first tiles land while the previous
//   unit is still being multiplied (persistent blocks, one per multiprocessor);
// - kConsumers warpgroups of 64 query rows each multiply, synchronized with
//   the producer only through mbarriers (no block barrier after the start),
//   so that one warpgroup's softmax runs under another's products;
// - the producer warpgroup gives up its registers (setmaxnreg) to the
//   consumers, whose 128-key score tiles need 64 accumulators per thread;
// - up to head dim 64, a consumer's finished rows go out through shared
//   memory and a TMA store (TmaAttentionShape::kTmaStore).
// Measured on the H200 against the wgmma kernel (bench/RESULTS.md,
// 2026-11-30): BERT-large's attention 18.5 -> 12.4 ms (200 -> 300 TFLOP/s),
// 3.8% end to end; BERT-base batch 128 0.65 -> 0.54 ms, 1.8% end to end.
//
// A unit is (sequence, head, 64 * kConsumers queries), in AttentionBlockAt's
// order; block b takes units b, b + gridDim.x, ... : its producer decodes them
// and hands them to the consumers in shared memory with their Q. Keys past a
// sequence's end inside the batch are the next sequence's rows (TMA reads whole
// boxes of the packed [tokens, 3 * hidden] matrix; rows past the matrix arrive
// as zeros): their scores are masked to -inf, so their probabilities are 0,
// and their V rows are zeroed before the last tile's P V product, so that no
// sequence's values (inf, should its V have overflowed) reach another's.
//
// With attention windows (AttentionArgs::row_bounds; two consumers, so 128
// queries and 128 keys) a unit is (window, head): the window's sequences,
// back to back, are its query rows and its one key tile, and in a window of
// several, each row's scores outside its own sequence are masked to -inf.
// Its V rows of other sequences then meet probabilities of exactly 0, so
// only a V that overflowed to inf (0 * inf = NaN) would reach a neighbour in
// the window; that sequence's own outputs are inf or NaN then already.
#pragma once

#include <cstdint>

#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/ops/attention_wgmma.cuh"
#include "backends/cuda/util/tma.cuh"

// Timeline hooks: bench/probes/attention_timeline.cu defines
// BERTRT_ATTENTION_TRACE(event, unit) before including this file, to record
// when each of a block's units reaches each step (AttentionTraceEvent);
// elsewhere they compile to nothing. The producer thread and every thread
// of each consumer warpgroup call them.
#ifndef BERTRT_ATTENTION_TRACE
#define BERTRT_ATTENTION_TRACE(event, unit)
#endif

namespace bertrt::cuda {

// The steps BERTRT_ATTENTION_TRACE marks. Consumer c's are kQFull + 7 * c
// onwards, in order.
enum AttentionTraceEvent {
  kTraceStart = 0,     // the block starts (unit 0)
  kTraceProducerUnit,  // the producer takes the unit up
  kTraceProducerQ,     // ... has a Q slot and issues Q
  kTraceProducerKv,    // ... has issued the unit's last K/V tile
  kTraceQFull,         // a consumer has the unit's Q
  kTraceKFull,         // ... its first K tile
  kTraceScores,        // ... its first scores (S_0)
  kTraceSoftmax,       // ... has their probabilities
  kTraceVFull,         // ... has the last V tile
  kTraceOutput,        // ... has the last P V product
  kTraceStored,        // ... has stored its rows
};

// The kernel's layout for head dim D with kConsumers consumer warpgroups.
template <typename T, int D, int kConsumers_, bool kPingPong_>
struct TmaAttentionShape {
  static constexpr int kConsumers = kConsumers_;
  // The consumers take turns to issue their products (flash attention 3's
  // ping-pong), so that one's softmax runs while another's products do.
  static constexpr bool kPingPong = kPingPong_;
  // Q slots: the next unit's Q lands while the present one's is still read.
  static constexpr int kQStages = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kQueries = 64 * kConsumers;  // per unit
  // Keys per K/V tile: 64 were 1.5-2.0% slower end to end at seq 128 and,
  // with three consumers, at seq 384 (H200, 2026-11-30).
  static constexpr int kKeys = 128;
  using QSwizzle = Swizzle<D, 64>;  // a consumer's 64 query rows
  using KvSwizzle = Swizzle<D, kKeys>;
  static constexpr int kBoxDims = KvSwizzle::kAtomDims;  // a TMA box: one swizzle line
  static constexpr int kBoxRows = 64;
  static constexpr int kQTile = 64 * D;      // elements of a consumer's Q
  static constexpr int kKvTile = kKeys * D;  // elements of a K or V tile
  static constexpr int kTileBytes = kKvTile * sizeof(T);
  static constexpr int kQBytes = kQStages * kConsumers * kQTile * static_cast<int>(sizeof(T));
  // Up to head dim 64 each consumer writes its 64 finished rows into shared
  // memory, in Q's layout, and one thread stores them with TMA: the direct
  // 16-byte stores took ~1,700 of a seq-128 unit's ~4,700 cycles on the H200,
  // the consumers idle meanwhile (bench/RESULTS.md, 2026-12-01). At head dim
  // 128 the staging would leave the K/V ring one slot.
  static constexpr bool kTmaStore = D <= 64;
  static constexpr int kOutBytes =
      kTmaStore ? kConsumers * kQTile * static_cast<int>(sizeof(T)) : 0;
  // Ring slots of a K and a V tile: as many as ~200 KiB holds, at most 4.
  static constexpr int kRingFits = (200 * 1024 - kQBytes - kOutBytes) / (2 * kTileBytes);
  static constexpr int kStages = kRingFits > 4 ? 4 : kRingFits;
  static_assert(kStages >= 2, "at least two K/V slots");
  // Barriers: Q full and empty per Q slot, then K full, V full and K/V empty per slot.
  static constexpr int kBarriers = 2 * kQStages + 3 * kStages;
  // Dynamic shared memory: the tiles, the barriers, a unit's description per
  // Q slot, plus room to align the tiles to 1,024 bytes (a swizzle pattern's
  // period).
  static constexpr size_t kSmemBytes = kQBytes + 2 * size_t{kStages} * kKvTile * sizeof(T) +
                                       kOutBytes + kBarriers * 8 + kQStages * sizeof(int4) + 1024;
  // Registers per thread after setmaxnreg (a multiple of 8; the block's
  // total within the multiprocessor's 64 Ki): the producer's few, the rest
  // to the consumers.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = (65536 / 128 - kProducerRegisters) / kConsumers / 8 * 8;
  static_assert(kConsumerRegisters <= 256, "setmaxnreg takes at most 256");
};

// Whether a lane's probabilities against the stale max fit P's type: below
// 2^15 each (fp16 holds 65,504), which partial sums below it guarantee.
// False for a NaN or an infinite sum.
__device__ __forceinline__ bool StaleMaxFits(const float (&sum)[2]) {
  constexpr float kLimit = 32768.0f;
  return sum[0] <= kLimit && sum[1] <= kLimit;
}

// The scores of this thread's fragment of a key tile, S = Q K^T again, on
// the CUDA cores from the Q and K tiles in shared memory (QSw's and KSw's
// layouts; rows r0 and r0 + 8 of Q): for the tile whose exponentials
// overflowed against the stale max, which overwrote them. (A wgmma here,
// under a condition, would make the compiler serialize all of the
// kernel's.) The loop runs over dims so that the scores keep their
// registers.
template <typename T, typename QSw, typename KSw, int D, int kKeyTiles>
__device__ __forceinline__ void RecomputeScores(float (&sc)[kKeyTiles][4], const T* q, const T* k,
                                                int r0, int t) {
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll 1
  for (int c = 0; c < D; ++c) {
    const float q0 = ToFloat(q[QSw::Offset(r0, c)]), q1 = ToFloat(q[QSw::Offset(r0 + 8, c)]);
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float kv = ToFloat(k[KSw::Offset(8 * j + 2 * t + e, c)]);
        sc[j][e] = fmaf(q0, kv, sc[j][e]);
        sc[j][2 + e] = fmaf(q1, kv, sc[j][2 + e]);
      }
    }
  }
}

template <typename T, int D, int kConsumers, bool kPingPong>
__global__ void __launch_bounds__(128 * (1 + kConsumers), 1)
    AttentionTmaKernel(const __grid_constant__ CUtensorMap qkv_map,
                       const __grid_constant__ CUtensorMap ctx_map, AttentionArgs a,
                       float scale_log2, int units) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = TmaAttentionShape<T, D, kConsumers, kPingPong>;
  using QSw = typename S::QSwizzle;
  using KvSw = typename S::KvSwizzle;
  constexpr int kKeys = S::kKeys, kStages = S::kStages;
  constexpr int kChunks = D / 16, kKeyTiles = kKeys / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
  constexpr int kQStages = S::kQStages;
  T* const qs = reinterpret_cast<T*>(smem);              // [kQStages][kConsumers][kQTile]
  T* const ks = qs + kQStages * kConsumers * S::kQTile;  // [kStages][kKvTile]
  T* const vs = ks + kStages * S::kKvTile;               // [kStages][kKvTile]
  T* const outs = vs + kStages * S::kKvTile;             // [kConsumers][kQTile] (kTmaStore)
  // The producer describes each unit to the consumers with its Q: (first
  // token, length, head, 2 * first query + whether it is a window of several
  // sequences); length 0 says there are no more.
  int4* const unit_of = reinterpret_cast<int4*>(outs + S::kOutBytes / sizeof(T));  // [kQStages]
  uint64_t* const q_full = reinterpret_cast<uint64_t*>(unit_of + kQStages);
  uint64_t* const q_empty = q_full + kQStages;
  uint64_t* const k_full = q_empty + kQStages;
  uint64_t* const v_full = k_full + kStages;
  uint64_t* const kv_empty = v_full + kStages;
  // Consumers release a slot (and Q) once per warp: 4 warps per warpgroup.
  constexpr int kReleases = 4 * kConsumers;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kQStages; ++i) {
      BarrierInit(&q_full[i], 1);
      BarrierInit(&q_empty[i], kReleases);
    }
    for (int i = 0; i < kStages; ++i) {
      BarrierInit(&k_full[i], 1);
      BarrierInit(&v_full[i], 1);
      BarrierInit(&kv_empty[i], kReleases);
    }
    FenceBarrierInit();
    // The tensor map's first use then finds it cached.
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&qkv_map))
                 : "memory");
    if constexpr (S::kTmaStore)
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&ctx_map))
                   : "memory");
  }
  BERTRT_ATTENTION_TRACE(kTraceStart, 0);
  __syncthreads();
  AfterPreviousKernel();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    if (threadIdx.x / 32 == 1 && a.prefetch.count > 0)
      PrefetchShare(a.prefetch, blockIdx.x, gridDim.x);
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(S::kProducerRegisters));
    if (threadIdx.x != 0) return;
    const int hidden = a.hidden;
    int stage = 0, q_stage = 0;
    uint32_t phase = 0, q_phase = 0;
    for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
      [[maybe_unused]] const int traced = unit / gridDim.x;  // the block's unit index
      BERTRT_ATTENTION_TRACE(kTraceProducerUnit, traced);
      AttentionBlock<T> u = AttentionBlockAt<T, D>(a, S::kQueries, unit);
      // A window of several sequences (only with row_bounds) says so in its length.
      const bool mixed = (u.len & kMixedWindow) != 0;
      u.len &= ~kMixedWindow;
      if (u.q0 >= u.len) continue;
      const int column = u.head * D;
      BarrierWait(&q_empty[q_stage], q_phase ^ 1);
      BERTRT_ATTENTION_TRACE(kTraceProducerQ, traced);
      // Published by the arrival (a release; the consumers' wait acquires).
      // The first query (0 in a window) goes with the mixed flag.
      unit_of[q_stage] = make_int4(u.begin, u.len, u.head, 2 * u.q0 + mixed);
      BarrierArriveExpect(&q_full[q_stage], kConsumers * S::kQTile * sizeof(T));
      for (int c = 0; c < kConsumers; ++c)
        for (int b = 0; b < D / S::kBoxDims; ++b)
          TmaLoad(qs + (q_stage * kConsumers + c) * S::kQTile + QSw::Offset(0, b * S::kBoxDims),
                  &qkv_map, column + b * S::kBoxDims, u.begin + u.q0 + 64 * c, &q_full[q_stage]);
      if (++q_stage == kQStages) q_stage = 0, q_phase ^= 1;
      const int tiles = (u.len + kKeys - 1) / kKeys;
      for (int j = 0; j < tiles; ++j) {
        BarrierWait(&kv_empty[stage], phase ^ 1);
        // K's boxes, then V's: the consumers need K first.
        for (int part = 1; part <= 2; ++part) {
          uint64_t* const full = part == 1 ? &k_full[stage] : &v_full[stage];
          T* const tile = (part == 1 ? ks : vs) + stage * S::kKvTile;
          BarrierArriveExpect(full, S::kTileBytes);
          for (int b = 0; b < D / S::kBoxDims; ++b)
            for (int r = 0; r < kKeys; r += S::kBoxRows)
              TmaLoad(tile + KvSw::Offset(r, b * S::kBoxDims), &qkv_map,
                      part * hidden + column + b * S::kBoxDims, u.begin + j * kKeys + r, full);
        }
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
      BERTRT_ATTENTION_TRACE(kTraceProducerKv, traced);
    }
    BarrierWait(&q_empty[q_stage], q_phase ^ 1);
    unit_of[q_stage] = make_int4(0, 0, 0, 0);
    BarrierArrive(&q_full[q_stage]);
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(S::kConsumerRegisters));
  const int consumer = warpgroup - 1;
  const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  // Each warp's lane 0 releases, once its warp has waited for the products
  // that read the slot.
  auto release = [&](uint64_t* bar) {
    if (lane == 0) BarrierArrive(bar);
  };

  // Ping-pong: consumer c waits on named barrier 1 + c for its turn to
  // issue products and, once they are issued, hands the turn to the next
  // (each barrier: the 128 threads that wait and the 128 that arrive). The
  // last consumer hands the first its first turn; the last turn passed at
  // the end finds no taker (a named barrier's count ends with the block).
  auto take_turn = [&] {
    if constexpr (kPingPong) NamedBarrier(1 + consumer, 256);
  };
  auto pass_turn = [&] {
    if constexpr (kPingPong) NamedBarrierArrive(1 + (consumer + 1) % kConsumers, 256);
  };
  if (consumer == kConsumers - 1) pass_turn();

  // The first Q, K and V slots' descriptors, made once from their
  // shared-memory addresses (qs_at: smem_raw's rounded up as `smem`): each
  // product's is one of them moved on by its slot's offset. Made from the
  // slots' generic pointers, they were converted again at every tile (sm_90a
  // SASS, fp16, head dim 64, three consumers: 374 -> 353 instructions per
  // thread and 128-key tile, and fewer spills; descriptors of the pointers
  // made once, or `smem` made from qs_at, left more).
  const uint32_t qs_at =
      (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u;
  const uint32_t ks_at = qs_at + static_cast<uint32_t>((ks - qs) * sizeof(T));
  const uint32_t vs_at = qs_at + static_cast<uint32_t>((vs - qs) * sizeof(T));
  const uint64_t q_desc0 = SmemDescriptor(qs_at, 16, QSw::kAtomBytes, QSw::kMode);
  const uint64_t k_desc0 = SmemDescriptor(ks_at, 16, KvSw::kAtomBytes, KvSw::kMode);
  const uint64_t v_desc0 = SmemDescriptor(vs_at, KvSw::kBlockBytes, KvSw::kAtomBytes, KvSw::kMode);
  int stage = 0, q_stage = 0;
  uint32_t phase = 0, q_phase = 0;
  [[maybe_unused]] const int trace0 = kTraceQFull + (kTraceStored - kTraceQFull + 1) * consumer;
  for (int traced = 0;; ++traced) {
    // The next unit, as the producer describes it: its description comes
    // with its Q (the consumers read no global memory but their outputs).
    BarrierWait(&q_full[q_stage], q_phase);
    BERTRT_ATTENTION_TRACE(trace0, traced);
    const int4 u = unit_of[q_stage];
    const int len = u.y;
    if (len == 0) {
      // Shared memory must outlive the last TMA store's reads.
      if (S::kTmaStore && threadIdx.x % 128 == 0)
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
      break;
    }
    const T* const q_tile = qs + (q_stage * kConsumers + consumer) * S::kQTile;
    const uint64_t q_desc =
        SmemDescriptorAt(q_desc0, (q_stage * kConsumers + consumer) * S::kQTile * sizeof(T));
    uint64_t* const q_done = &q_empty[q_stage];
    if (++q_stage == kQStages) q_stage = 0, q_phase ^= 1;
    const int group_q0 = (u.w >> 1) + 64 * consumer;
    const bool mixed = u.w & 1;
    // A warpgroup wholly past the sequence's end multiplies rows that are
    // never stored (no product may sit under a condition: with the turns
    // between issue and wait, ptxas then serialized every wgmma of the
    // ping-pong kernel), and waits and releases as the others do, so that
    // every barrier's phases count the same arrivals.
    const bool active = group_q0 < len;
    const int row0 = group_q0 + 16 * warp + g;  // and row0 + 8
    const int tiles = (len + kKeys - 1) / kKeys;
    // A window of several sequences (one key tile): each row attends to its
    // own sequence's keys, whose bounds are the one global read of a
    // consumer besides its outputs (issued here, needed after the first
    // product). Rows past the window keep [0, len): they are never stored.
    int lo0 = 0, hi0 = len, lo1 = 0, hi1 = len;
    if (mixed) {
      if (row0 < len) {
        const int b = __ldg(a.row_bounds + u.x + row0);
        lo0 = b & 0xffff, hi0 = b >> 16;
      }
      if (row0 + 8 < len) {
        const int b = __ldg(a.row_bounds + u.x + row0 + 8);
        lo1 = b & 0xffff, hi1 = b >> 16;
      }
    }

    WgmmaOutputs<T, D, kKeys> out;
    out.Reset();

    // S_j = Q K_j^T over D / 16 chunks of 16 dims, both from shared memory;
    // then the online softmax turns it into P_j (the PV product's operand)
    // and says by how much O must shrink.
    float sc[1][kKeyTiles][4];
    float(&s_flat)[kKeys / 2] = *reinterpret_cast<float(*)[kKeys / 2]>(&sc[0][0][0]);
    auto issue_s = [&](int slot) {
      const uint64_t k_desc = SmemDescriptorAt(k_desc0, slot * S::kKvTile * sizeof(T));
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        WgmmaSS(s_flat, SmemDescriptorAt(q_desc, QSw::Offset(0, 16 * c) * sizeof(T)),
                SmemDescriptorAt(k_desc, KvSw::Offset(0, 16 * c) * sizeof(T)), T{}, c > 0);
      WgmmaCommit();
    };
    auto mask = [&](int j) {
      if (mixed)  // uniform
        MaskKeysOutsideRows(sc, lo0, hi0, lo1, hi1, t);
      else if ((j + 1) * kKeys > len)  // uniform
        MaskKeysPastEnd(sc, j * kKeys, len, t);
    };
    // A later tile whose probabilities against the stale max did not fit
    // (StaleMaxFits): each row of the warp whose largest is above 1
    // moves its max up by that largest's power of two, so that they shrink
    // exactly, as do its sum and outputs; where one overflowed, the tile's
    // scores are computed again and take OnlineSoftmaxStep. Warp-uniform,
    // with no product in flight.
    auto refit = [&](int j, const T* kt, const float(&sum)[2]) {
      float top[2] = {0.0f, 0.0f};
      RowMaxes(sc[0], top);
      float alpha[1][2];
      if (__any_sync(0xffffffffu, !(top[0] < INFINITY && top[1] < INFINITY))) {
        RecomputeScores<T, QSw, KvSw, D>(sc[0], q_tile, kt, 16 * warp + g, t);
        mask(j);
        OnlineSoftmaxStep(sc, out.m, out.l, alpha, scale_log2);
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int e = 0;
          if (top[h] > 1.0f) frexpf(top[h], &e);
          alpha[0][h] = ldexpf(1.0f, -e);
          out.m[0][h] += e / scale_log2;
          out.l[0][h] = (out.l[0][h] + sum[h]) * alpha[0][h];
        }
        RescaleOutputs(sc, alpha);  // the probabilities, as the outputs below
      }
      RescaleOutputs(out.o, alpha);
    };

    // Tile 0 alone: there is no P V product to issue with it (a product
    // issued under a condition makes the compiler serialize them all).
    BarrierWait(&k_full[stage], phase);
    BERTRT_ATTENTION_TRACE(trace0 + kTraceKFull - kTraceQFull, traced);
    take_turn();
    WgmmaFence();
    issue_s(stage);
    pass_turn();
    WgmmaWait<0>();
    PinRegisters(s_flat);
    BERTRT_ATTENTION_TRACE(trace0 + kTraceScores - kTraceQFull, traced);
    {
      mask(0);
      float alpha[1][2];  // 0: nothing to rescale
      OnlineSoftmaxStep(sc, out.m, out.l, alpha, scale_log2);
    }
    out.Pack(sc[0]);
    BERTRT_ATTENTION_TRACE(trace0 + kTraceSoftmax - kTraceQFull, traced);
    if (tiles == 1) release(q_done);
    int previous = stage;
    uint32_t previous_phase = phase;
    if (++stage == kStages) stage = 0, phase ^= 1;
    for (int j = 1; j < tiles; ++j) {
      BarrierWait(&k_full[stage], phase);
      BarrierWait(&v_full[previous], previous_phase);
      take_turn();
      // S_j is issued with P_{j-1} V_{j-1}, and tile j's softmax runs
      // while the tensor cores are still on the P V product.
      out.PinOperands();
      WgmmaFence();
      issue_s(stage);
      out.template IssuePvAt<KvSw>(SmemDescriptorAt(v_desc0, previous * S::kKvTile * sizeof(T)));
      WgmmaCommit();
      pass_turn();
      WgmmaWait<1>();  // S_j
      PinRegisters(s_flat);
      // Tiles after a row's first are exponentiated against the running max
      // of the earlier ones as it stands: no max over this tile's scores and
      // no rescale of the outputs, which were 1.5 of OnlineSoftmaxStep's 4
      // FP32 instructions per score besides the exponential (max, fma, add,
      // half a pack, half a rescale). At BERT-large's seq 384 (three 128-key
      // tiles) the H200 runs at its power cap, where the softmax's
      // instructions cost time through energy (bench/RESULTS.md, 2026-12-03).
      // Where the tile's scores stay at or below the max (the rule once a row
      // has seen a tile), this is OnlineSoftmaxStep bit for bit (its alpha is
      // 2^0 = 1). Above it, a probability above 1 is as precise in P's
      // fp16/bf16 as one below, up to fp16's range: StaleMaxFits checks the
      // lanes' partial sums, each of which bounds its probabilities, and
      // `refit` mends the rare tile that does not fit.
      mask(j);
      float sum[2];
      ExpAgainstMax(sc[0], out.m[0], scale_log2, sum);
      WgmmaWait<0>();
      out.PinOperands();
      if (__all_sync(0xffffffffu, StaleMaxFits(sum))) {
        out.l[0][0] += sum[0];
        out.l[0][1] += sum[1];
      } else {
        refit(j, ks + stage * S::kKvTile, sum);
      }
      out.Pack(sc[0]);
      // (Released only with no product in flight: a branch between a wgmma
      // and its wait would make the compiler serialize them too.)
      if (j + 1 == tiles) release(q_done);
      release(&kv_empty[previous]);
      previous = stage;
      previous_phase = phase;
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    // The last tile's P V product. Its V rows past the sequence's end are
    // the next sequence's: each warpgroup zeroes them before its product, so
    // that their 0 probabilities meet 0 (0 * inf would be NaN, should that
    // sequence's V have overflowed). Both may write the same zeros.
    BarrierWait(&v_full[previous], previous_phase);
    BERTRT_ATTENTION_TRACE(trace0 + kTraceVFull - kTraceQFull, traced);
    const int valid = len - (tiles - 1) * kKeys;
    if (valid < kKeys) {  // uniform
      T* const vt = vs + previous * S::kKvTile;
      constexpr int kLineChunks = KvSw::kBytes / 16;  // 16-byte pieces of a key's row
      constexpr int kBlocks = D / KvSw::kAtomDims;    // column blocks
      const int pieces = (kKeys - valid) * kBlocks * kLineChunks;
      for (int i = threadIdx.x % 128; i < pieces; i += 128) {
        const int chunk = i % kLineChunks, line = i / kLineChunks;
        const int r = valid + line / kBlocks, block = line % kBlocks;
        // Key r's row in a column block is one whole line (Swizzle permutes
        // the pieces within it).
        *reinterpret_cast<uint4*>(vt + (block * kKeys + r) * KvSw::kAtomDims + 8 * chunk) =
            make_uint4(0, 0, 0, 0);
      }
      FenceSharedForAsyncProxy();
      NamedBarrier(1 + kConsumers + consumer, 128);
    }
    take_turn();
    out.PinOperands();
    WgmmaFence();
    out.template IssuePvAt<KvSw>(SmemDescriptorAt(v_desc0, previous * S::kKvTile * sizeof(T)));
    WgmmaCommit();
    pass_turn();
    WgmmaWait<0>();
    PinRegisters(out.Flat());
    BERTRT_ATTENTION_TRACE(trace0 + kTraceOutput - kTraceQFull, traced);
    release(&kv_empty[previous]);
    if (S::kTmaStore && group_q0 + 64 <= len) {  // uniform: all 64 rows are outputs
      T* const staged = outs + consumer * S::kQTile;
      // The staging tile is free once the last unit's store has read it.
      if (threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      NamedBarrier(1 + kConsumers + consumer, 128);
      float inverse[2];
      InverseRowSums(out.l[0], inverse);
      const int r0 = 16 * warp + g;
#pragma unroll
      for (int d = 0; d < D / 8; ++d)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<uint32_t*>(staged + QSw::Offset(r0 + 8 * h, 8 * d + 2 * t)) =
              PackFloats(out.o[0][d][2 * h] * inverse[h], out.o[0][d][2 * h + 1] * inverse[h], T{});
      FenceSharedForAsyncProxy();
      NamedBarrier(1 + kConsumers + consumer, 128);
      if (threadIdx.x % 128 == 0) {
        for (int b = 0; b < D / S::kBoxDims; ++b)
          TmaStore(&ctx_map, staged + QSw::Offset(0, b * S::kBoxDims), u.z * D + b * S::kBoxDims,
                   u.x + group_q0);
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      }
    } else if (active) {
      T* const rows = static_cast<T*>(a.ctx) + static_cast<size_t>(u.x) * a.hidden + u.z * D;
      StoreOutputRows(rows, a.hidden, out.o[0], out.l[0], row0, len, t);
    }
    BERTRT_ATTENTION_TRACE(trace0 + kTraceStored - kTraceQFull, traced);
  }
#else
  // Launched only on sm_90 by a build that compiled sm_90a (attention.cu).
  __trap();
#endif
}

}  // namespace bertrt::cuda

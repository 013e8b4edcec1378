// splitk_gemm.h's kernel. A block (one warpgroup) owns a tile of 64 rows x 64
// output columns and one share of K: it copies 64-deep K slices of x and W
// through a kStages ring of shared memory (cp.async, 128-byte swizzle, the
// layout wgmma reads without bank conflicts) and multiplies them with wgmma
// reading both operands from there. The grid is (ways, column tiles, row tiles)
// in clusters of (ways, 1, 1): the blocks of a cluster share one output tile.
// At the end each block leaves its fp32 partial tile in its shared memory, and
// block r of the cluster finishes rows r, r + ways, ...: it sums the partials
// of all ways in rank order (distributed shared memory), adds bias and
// residual, applies the activation and stores the row.
#include <cooperative_groups.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "backends/cuda/gemm/splitk_gemm.h"
#include "backends/cuda/ops/attention.h"
#include "backends/cuda/ops/attention_wgmma.cuh"
#include "backends/cuda/util/cuda_check.h"
#include "backends/cuda/util/device_util.cuh"
#include "backends/cuda/util/wgmma.cuh"

namespace bertrt::cuda {
namespace {

constexpr int kTileN = 64;  // output columns per block: one wgmma's N
constexpr int kTileK = 64;  // K per slice: one 128-byte swizzle line of 16-bit elements
// Slices in shared memory: one the tensor cores read, one they may still
// be reading (a warpgroup waits for its previous slice's products only at
// the end of the next iteration), and kStages - 2 on their way.
constexpr int kStages = 6;
// The portable cluster size. (16 ways, Hopper's non-portable limit, were
// slower than 8 on BERT-base's shapes: the reduction grows with the ways.)
constexpr int kMaxWays = 8;
// Floats per row of a partial tile; the padding spreads a warp's fragment
// stores over the banks.
constexpr int kPartialStride = kTileN + 8;

// Rows per block. (Blocks of two warpgroups and 128 rows were slower at 65-128
// rows than two blocks of one: BERT-base's FFN-output GEMM at 128 rows 5.49
// us against 4.85 on the H200; they also fit one block per multiprocessor,
// not two.)
constexpr int kTileM = 64;
constexpr int kThreads = 128;

// Dynamic shared memory: the A and B slices of every stage, and room to
// align them to 1,024 bytes (a swizzle pattern's period); the partial tile
// reuses the same space.
constexpr size_t kStageBytes = size_t{kStages} * (kTileM + kTileN) * kTileK * 2;
static_assert(size_t{kTileM} * kPartialStride * 4 <= kStageBytes);
constexpr size_t kSmemBytes = kStageBytes + 1024;

// Element offset of (row r, k c), c a multiple of 8, in a slice of rows of
// 64 16-bit elements: 16-byte chunk c / 8 of row r sits at chunk
// (c / 8) ^ (r % 8), the XOR the hardware applies under 128-byte swizzle.
__device__ __forceinline__ int SwizzledOffset(int r, int c) {
  return r * kTileK + (((c >> 3) ^ (r & 7)) << 3);
}

template <typename T, Epilogue kEpilogue>
__global__ void __launch_bounds__(kThreads) SplitKGemmKernel(SplitKGemmArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace cg = cooperative_groups;
  constexpr int kSliceA = kTileM * kTileK, kSliceB = kTileN * kTileK;  // elements
  constexpr int kCopiesA = kSliceA / 8 / kThreads, kCopiesB = kSliceB / 8 / kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
  T* const as = reinterpret_cast<T*>(smem);  // [kStages][kSliceA]
  T* const bs = as + kStages * kSliceA;      // [kStages][kSliceB]

  const cg::cluster_group cluster = cg::this_cluster();
  const int ways = static_cast<int>(cluster.num_blocks());
  const int way = static_cast<int>(cluster.block_rank());
  const int n0 = blockIdx.y * kTileN, m0 = blockIdx.z * kTileM;
  const int k_dim = a.in, slices = k_dim / kTileK;
  const int first = way * slices / ways, count = (way + 1) * slices / ways - first;

  // Eight consecutive threads copy one row's 128 bytes of a slice; each
  // thread's rows and chunks are the same in every slice, so their
  // addresses are worked out once. Rows past the end are zero-filled.
  const T* src_a[kCopiesA];
  const T* src_b[kCopiesB];
  int dst_a[kCopiesA], dst_b[kCopiesB];
  bool valid_a[kCopiesA];
#pragma unroll
  for (int j = 0; j < kCopiesA; ++j) {
    const int i = threadIdx.x + j * kThreads, r = i >> 3, c = (i & 7) << 3;
    valid_a[j] = m0 + r < a.rows;
    src_a[j] = static_cast<const T*>(a.x) + static_cast<size_t>(valid_a[j] ? m0 + r : 0) * k_dim +
               first * kTileK + c;
    dst_a[j] = SwizzledOffset(r, c);
  }
#pragma unroll
  for (int j = 0; j < kCopiesB; ++j) {
    const int i = threadIdx.x + j * kThreads, r = i >> 3, c = (i & 7) << 3;
    src_b[j] =
        static_cast<const T*>(a.w) + static_cast<size_t>(n0 + r) * k_dim + first * kTileK + c;
    dst_b[j] = SwizzledOffset(r, c);
  }
  // Slice `first + s` into stage s % kStages: its rows of x, of W.
  auto load_x = [&](int s) {
    T* const sa = as + (s % kStages) * kSliceA;
#pragma unroll
    for (int j = 0; j < kCopiesA; ++j)
      CopyAsync16(sa + dst_a[j], src_a[j] + s * kTileK, valid_a[j]);
  };
  auto load_w = [&](int s) {
    T* const sb = bs + (s % kStages) * kSliceB;
#pragma unroll
    for (int j = 0; j < kCopiesB; ++j) CopyAsync16(sb + dst_b[j], src_b[j] + s * kTileK, true);
  };

  float acc[32] = {};
  // The weights do not depend on the previous kernel: under programmatic
  // dependent launch their first slices are on their way while it
  // finishes. x is read only after it has. They join the first slice's
  // copy group.
#pragma unroll
  for (int s = 0; s < kStages - 2; ++s)
    if (s < count) load_w(s);
  AfterPreviousKernel();
#pragma unroll
  for (int s = 0; s < kStages - 2; ++s) {
    if (s < count) load_x(s);
    CopyAsyncCommit();  // empty groups too, so that the wait below counts slices
  }
  // The first stage's descriptors; each slice's are theirs moved on.
  const uint64_t a_desc0 = SmemDescriptor(as, 16, 1024, 1);
  const uint64_t b_desc0 = SmemDescriptor(bs, 16, 1024, 1);
  for (int i = 0; i < count; ++i) {
    CopyAsyncWait<kStages - 3>();  // slice i is in, for this thread's copies
    FenceSharedForAsyncProxy();
    // ... and for every thread's; and the products of slice i - 2 are done
    // (the warpgroup waits for all but its last group below), so its stage
    // can be refilled.
    __syncthreads();
    if (i + kStages - 2 < count) load_x(i + kStages - 2), load_w(i + kStages - 2);
    CopyAsyncCommit();
    const int stage = i % kStages;
    PinRegisters(acc);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk)
      WgmmaSS(acc, SmemDescriptorAt(a_desc0, (stage * kSliceA + 16 * kk) * sizeof(T)),
              SmemDescriptorAt(b_desc0, (stage * kSliceB + 16 * kk) * sizeof(T)), T{});
    WgmmaCommit();
    WgmmaWait<1>();
    PinRegisters(acc);
  }
  WgmmaWait<0>();
  PinRegisters(acc);
  CopyAsyncWait<0>();
  __syncthreads();  // the stages are free: the partial tile takes their place

  float* const partial = reinterpret_cast<float*>(smem);  // [kTileM][kPartialStride]
  {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = warp * 16 + (lane >> 2), col = 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < kTileN / 8; ++i) {
      *reinterpret_cast<float2*>(partial + row * kPartialStride + 8 * i + col) =
          make_float2(acc[4 * i], acc[4 * i + 1]);
      *reinterpret_cast<float2*>(partial + (row + 8) * kPartialStride + 8 * i + col) =
          make_float2(acc[4 * i + 2], acc[4 * i + 3]);
    }
  }
  cluster.sync();  // every way's partial is in place

  // kTileN / 4 threads per row, 4 columns each.
  constexpr int kRowThreads = kTileN / 4;
  const int rows_here = min(kTileM, a.rows - m0);
  const int my_rows = rows_here > way ? (rows_here - way + ways - 1) / ways : 0;
  for (int j = threadIdx.x; j < my_rows * kRowThreads; j += kThreads) {
    const int r = way + ways * (j / kRowThreads), c = (j % kRowThreads) * 4;
    // Every way's loads are issued before the first add: one round trip
    // through the cluster, not one per way.
    float4 part[kMaxWays];
#pragma unroll
    for (int q = 0; q < kMaxWays; ++q)
      if (q < ways)
        part[q] = *reinterpret_cast<const float4*>(cluster.map_shared_rank(partial, q) +
                                                   r * kPartialStride + c);
    float4 sum = part[0];
#pragma unroll
    for (int q = 1; q < kMaxWays; ++q)
      if (q < ways) sum.x += part[q].x, sum.y += part[q].y, sum.z += part[q].z, sum.w += part[q].w;
    const size_t at = static_cast<size_t>(m0 + r) * a.out + n0 + c;
    const Vec4<T> b = *reinterpret_cast<const Vec4<T>*>(static_cast<const T*>(a.bias) + n0 + c);
    float v[4] = {sum.x + ToFloat(b.v[0]), sum.y + ToFloat(b.v[1]), sum.z + ToFloat(b.v[2]),
                  sum.w + ToFloat(b.v[3])};
    if (a.residual) {
      const Vec4<T> res = *reinterpret_cast<const Vec4<T>*>(static_cast<const T*>(a.residual) + at);
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] += ToFloat(res.v[e]);
    }
    Vec4<T> out;
#pragma unroll
    for (int e = 0; e < 4; ++e) out.v[e] = FromFloat<T>(Activate<kEpilogue>(v[e]));
    *reinterpret_cast<Vec4<T>*>(static_cast<T*>(a.y) + at) = out;
  }
  cluster.sync();  // no block leaves while another still reads its partial
#else
  AfterPreviousKernel();
#endif
}

// The output's tiles of kTileM x kTileN, one cluster each.
int RowTiles(int rows) { return (rows + kTileM - 1) / kTileM; }
int OutputTiles(int rows, int out) { return RowTiles(rows) * (out / kTileN); }

cudaLaunchAttribute ClusterOf(int ways) {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = ways;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  return cluster;
}

// How many clusters of `ways` blocks of `kernel` the current GPU holds at
// once (cudaOccupancyMaxActiveClusters). Cached per GPU, kernel and ways; a
// miss also lifts the kernel's shared memory limit on this GPU to
// kSmemBytes, so that a launch does no set-up once its shape was seen.
StatusOr<int> ActiveClusters(const void* kernel, int ways) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int>, int> cache;
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::lock_guard lock(mu);
  const auto key = std::make_tuple(device, kernel, ways);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(kSmemBytes)));
  cudaLaunchAttribute cluster = ClusterOf(ways);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(ways);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  return cache[key] = clusters;
}

// The kernel with K split up to `ways` ways (the cluster size).
template <typename T, Epilogue kEpilogue>
Status LaunchFor(const SplitKGemmArgs& a, int ways, Stream stream) {
  const void* kernel = reinterpret_cast<const void*>(SplitKGemmKernel<T, kEpilogue>);
  // One cluster per output tile, all at once: a cluster that finds no room
  // waits for a whole other one to finish (BERT-large's FFN-output GEMM at
  // 128 rows, 16 clusters of 8 blocks of one per multiprocessor: 6% slower
  // end to end on the H200 than cuBLASLt). Fewer ways then.
  const int tiles = OutputTiles(a.rows, a.out);
  for (;; --ways) {
    ASSIGN_OR_RETURN(const int clusters, ActiveClusters(kernel, ways));
    if (ways == 1 || clusters >= tiles) break;
  }
  cudaLaunchAttribute attrs[2] = {ClusterOf(ways), {}};
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(ways, a.out / kTileN, RowTiles(a.rows));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream.handle;
  config.attrs = attrs;
  config.numAttrs = stream.overlap_launch ? 2 : 1;
  CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, SplitKGemmKernel<T, kEpilogue>, a));
  return Status::Ok();
}

template <typename T>
Status LaunchForType(const SplitKGemmArgs& a, int ways, Stream stream) {
  switch (a.epilogue) {
    case Epilogue::kBias:
      return LaunchFor<T, Epilogue::kBias>(a, ways, stream);
    case Epilogue::kBiasGeluTanh:
      return LaunchFor<T, Epilogue::kBiasGeluTanh>(a, ways, stream);
    case Epilogue::kBiasRelu:
      return LaunchFor<T, Epilogue::kBiasRelu>(a, ways, stream);
    case Epilogue::kBiasGelu:
      return LaunchFor<T, Epilogue::kBiasGelu>(a, ways, stream);
  }
  return Internal("split-K GEMM: unknown epilogue");
}

}  // namespace

bool SplitKLinearApplies(Precision p, int compute_capability, int rows, int in, int out,
                         Epilogue epilogue) {
  if (!WgmmaAttentionBuilt() || compute_capability != 90 || p == Precision::kFp32 || rows <= 0 ||
      in <= 0 || in % kTileK != 0 || out <= 0 || out % kTileN != 0)
    return false;
  // Where it beat cuBLASLt's heuristic on the H200 (bench/RESULTS.md,
  // 2026-11-30, bench/probes/splitk_gemm_probe.cu): up to 128 rows with K
  // at least the output width (BERT-base's attention-output and FFN-output
  // GEMMs). With more output columns or rows cuBLASLt's tiles fill the GPU
  // without a split. For the erf GELU the alternative is cuBLASLt's bias
  // GEMM plus the activation kernel over its output: BERT-base's FFN input
  // (768 -> 3,072) at 32 and 64 rows took 3.7 and 4.4 us here against
  // cuBLASLt's 3.6 and 3.8 before the activation (~1.5 us); at 128 rows
  // (one way: 96 output tiles) 5.7-6.5 against 4.2 (2026-12-02).
  if (epilogue == Epilogue::kBiasGelu) return rows <= 64;
  return rows <= 128 && out <= in;
}

int SplitKWays(int rows, int in, int out, int sm_count) {
  const int tiles = OutputTiles(rows, out);
  // Three or more slices per way (fewer left the reduction dominant), and
  // no more blocks than multiprocessors.
  return std::clamp(std::min(in / kTileK / 3, sm_count / std::max(tiles, 1)), 1, kMaxWays);
}

Status SplitKLinear(Precision p, const SplitKGemmArgs& a, Stream stream) {
  if (a.in % kTileK != 0 || a.out % kTileN != 0)
    return InvalidArgument("split-K GEMM: takes sizes that are multiples of 64, not " +
                           std::to_string(a.in) + " -> " + std::to_string(a.out));
  if (a.rows == 0) return Status::Ok();
  const int ways = SplitKWays(a.rows, a.in, a.out, a.sm_count);
  switch (p) {
    case Precision::kFp16:
      return LaunchForType<__half>(a, ways, stream);
    case Precision::kBf16:
      return LaunchForType<__nv_bfloat16>(a, ways, stream);
    case Precision::kFp32:
      break;
  }
  return InvalidArgument("split-K GEMM: takes fp16 or bf16");
}

}  // namespace bertrt::cuda

// Probe (not part of the build): where a unit of the TMA attention kernel
// (attention_tma.cuh, 2 consumers taking turns, head dim 64, fp16) spends
// its time at seq 128. Measured inside the engine's graph (bench --profile,
// 2026-12-01), attention costs ~3.1 us per unit per SM where a unit's
// products are ~0.55 us of tensor work. This build of the kernel records
// clock64 at each step of each unit (BERTRT_ATTENTION_TRACE) for every block,
// and prints, per unit index, the mean cycles between consecutive steps.
//   nvcc -O2 -std=c++17 -arch=sm_90a -I include -I src -DBERTRT_CUDA_SM90A=1 \
//     bench/probes/attention_timeline.cu -lcuda -o attention_timeline
//   ./attention_timeline            (batches 32 and 128 of 128 tokens)
// Results (H200): bench/RESULTS.md, "Attention's output stores". It found the
// stores taking ~40% of a unit (4-byte stores from the fragment layout), now
// a TMA store through shared memory.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

constexpr int kMaxUnits = 16;  // traced per block
constexpr int kEvents = 32;

__device__ long long* g_trace;

// Records the step's clock on the first thread of the calling warpgroup
// (or the producer thread). A predicated store, not a branch: divergent code
// among the consumers' products makes ptxas serialize their wgmmas.
__device__ __forceinline__ void TraceEvent(int event, int unit) {
  long long* const slot = g_trace + (blockIdx.x * kMaxUnits + unit) * kEvents + event;
  const int first = threadIdx.x % 128 == 0 && unit < kMaxUnits;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.s32 p, %0, 0;\n @p st.global.s64 [%1], %2;\n}\n" ::"r"(first),
      "l"(slot), "l"(clock64())
      : "memory");
}
#define BERTRT_ATTENTION_TRACE(event, unit) TraceEvent(event, unit)

#include "backends/cuda/ops/attention_tma.cuh"

using namespace bertrt::cuda;

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

constexpr int kHidden = 768, kHeads = 12, kD = 64;
using Layout = TmaAttentionShape<__half, kD, 2, true>;

void Run(int batch, int len) {
  const int tokens = batch * len;
  std::vector<__half> host(static_cast<size_t>(tokens) * 3 * kHidden);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (auto& x : host) x = __float2half(normal(rng));
  __half *qkv, *ctx;
  CHECK(cudaMalloc(&qkv, host.size() * sizeof(__half)));
  CHECK(cudaMalloc(&ctx, static_cast<size_t>(tokens) * kHidden * sizeof(__half)));
  CHECK(cudaMemcpy(qkv, host.data(), host.size() * sizeof(__half), cudaMemcpyHostToDevice));
  std::vector<int32_t> by_length;
  for (int s = 0; s < batch; ++s) by_length.insert(by_length.end(), {s * len, len});
  int32_t* by_length_d;
  CHECK(cudaMalloc(&by_length_d, by_length.size() * sizeof(int32_t)));
  CHECK(cudaMemcpy(by_length_d, by_length.data(), by_length.size() * sizeof(int32_t),
                   cudaMemcpyHostToDevice));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  AttentionArgs a{qkv, by_length_d, batch, len, kHidden, kHeads, ctx, 90, sms};
  a.tokens = tokens;
  const int units = batch * kHeads * QueryBlocks(len, Layout::kQueries);
  const int blocks = std::min(units, sms);
  const long ld = 3L * kHidden;
  auto map = TensorMap2D<__half>(qkv, tokens, ld, ld, Layout::kBoxRows, Layout::kBoxDims,
                                 CU_TENSOR_MAP_SWIZZLE_128B);
  auto ctx_map = TensorMap2D<__half>(ctx, tokens, kHidden, kHidden, 64, Layout::kBoxDims,
                                     CU_TENSOR_MAP_SWIZZLE_128B);
  if (!map.ok() || !ctx_map.ok()) {
    std::fprintf(stderr, "cannot make the tensor maps\n");
    std::exit(1);
  }
  auto kernel = AttentionTmaKernel<__half, kD, 2, true>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(Layout::kSmemBytes)));
  const size_t slots = static_cast<size_t>(blocks) * kMaxUnits * kEvents;
  long long* trace;
  CHECK(cudaMalloc(&trace, slots * sizeof(long long)));
  CHECK(cudaMemset(trace, 0, slots * sizeof(long long)));
  CHECK(cudaMemcpyToSymbol(g_trace, &trace, sizeof(trace)));
  const float scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(kD));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  constexpr int kRuns = 50;
  for (int i = 0; i < 10; ++i)
    kernel<<<blocks, Layout::kThreads, Layout::kSmemBytes>>>(*map, *ctx_map, a, scale_log2, units);
  CHECK(cudaEventRecord(begin));
  for (int i = 0; i < kRuns; ++i)
    kernel<<<blocks, Layout::kThreads, Layout::kSmemBytes>>>(*map, *ctx_map, a, scale_log2, units);
  CHECK(cudaEventRecord(end));
  CHECK(cudaEventSynchronize(end));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, begin, end));
  std::vector<long long> t(slots);
  CHECK(cudaMemcpy(t.data(), trace, slots * sizeof(long long), cudaMemcpyDeviceToHost));

  const int per_block = (units + blocks - 1) / blocks;
  // Cycles from the block's start to its last store, for the clock rate.
  double span = 0;
  int spanned = 0;
  for (int b = 0; b < blocks; ++b) {
    const int mine = (units - b + blocks - 1) / blocks;
    if (mine > kMaxUnits) continue;
    const long long* last = &t[(b * kMaxUnits + mine - 1) * kEvents];
    const long long done = std::max(last[kTraceStored], last[kTraceStored + 7]);
    span += done - t[(b * kMaxUnits) * kEvents + kTraceStart];
    ++spanned;
  }
  std::printf(
      "\n== batch %d x %d tokens: %d units on %d blocks (up to %d each), kernel %.2f us "
      "(events, mean of %d back to back), block start to last store %.0f cycles\n",
      batch, len, units, blocks, per_block, ms * 1e3 / kRuns, kRuns, span / spanned);
  const char* names[] = {"start", "P unit",  "P q",   "P kv", "qfull", "kfull",
                         "S",     "softmax", "vfull", "PV",   "stored"};
  std::printf(
      "mean cycles since the block's start, per unit of the block (blocks with that "
      "unit); P = producer, c0/c1 = consumers\n%-6s",
      "unit");
  for (int e = 1; e <= 3; ++e) std::printf(" %8s", names[e]);
  for (int c = 0; c < 2; ++c)
    for (int e = kTraceQFull; e <= kTraceStored; ++e)
      std::printf(" %5s.%-3s", c ? "c1" : "c0", names[e]);
  std::printf("\n");
  for (int k = 0; k < std::min(per_block, kMaxUnits); ++k) {
    std::vector<double> sum(kEvents, 0);
    int n = 0;
    for (int b = 0; b < blocks; ++b) {
      if ((units - b + blocks - 1) / blocks <= k) continue;
      const long long start = t[(b * kMaxUnits) * kEvents + kTraceStart];
      for (int e = 0; e < kEvents; ++e) sum[e] += t[(b * kMaxUnits + k) * kEvents + e] - start;
      ++n;
    }
    std::printf("%-6d", k);
    for (int e = 1; e <= 3; ++e) std::printf(" %8.0f", sum[e] / n);
    for (int e = kTraceQFull; e < kTraceQFull + 14; ++e) std::printf(" %9.0f", sum[e] / n);
    std::printf("\n");
  }
  CHECK(cudaFree(trace));
  CHECK(cudaFree(by_length_d));
  CHECK(cudaFree(qkv));
  CHECK(cudaFree(ctx));
}

int main() {
  Run(32, 128);
  Run(128, 128);
  return 0;
}

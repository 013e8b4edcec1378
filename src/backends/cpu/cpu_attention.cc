// Ragged multi-head attention: each (sequence, head) pair is an independent
// task over that sequence's own tokens, so there is no padding to mask and
// no work spent on it.
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/vec_math.h"

namespace bertrt::cpu {

size_t AttentionScratchFloats(int max_len, int threads) {
  return static_cast<size_t>(max_len) * max_len * std::max(1, threads);
}

namespace {

void SoftmaxRow(float* row, int n) {
  float mx = row[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, row[i]);
  const __m256 vmx = _mm256_set1_ps(mx);
  Map8(row, nullptr, n, [vmx](__m256 v, __m256) { return Exp8(_mm256_sub_ps(v, vmx)); });
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += row[i];
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int i = 0; i < n; ++i) row[i] *= inv;
}

// A local window's queries go this many at a time (AttentionWindow).
constexpr int kWindowQueries = 64;

}  // namespace

void Attention(const float* qkv, const int32_t* cu_seqlens, int num_seqs, int max_len, int h,
               int heads, const RelativeBias& bias, float* ctx, float* scratch, int threads,
               AttentionWindow window) {
  const int d = h / heads;
  const int ld = 3 * h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int tasks = num_seqs * heads;
  const int nt = std::max(1, std::min(threads, tasks));
  // One oneDNN call per task on one thread each, so a task's arithmetic
  // depends only on its sequence length. oneDNN does not nest inside an active
  // region; the thread-count override covers the one-thread (inactive) case.
#pragma omp parallel num_threads(nt)
  {
    omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < tasks; ++task) {
      const int s = task / heads, head = task % heads;
      const int begin = cu_seqlens[s], len = cu_seqlens[s + 1] - begin;
      float* scores = scratch + static_cast<size_t>(omp_get_thread_num()) * max_len * max_len;
      const float* q = qkv + static_cast<size_t>(begin) * ld + head * d;
      const float* k = q + h;
      const float* v = q + 2 * h;
      // Blocks of queries against the keys their windows reach (every key
      // without a window: one block), so that a local layer's time and
      // scratch are linear in length.
      const int w = window.window;
      const int block = w > 0 ? kWindowQueries : len;
      for (int i0 = 0; i0 < len; i0 += block) {
        const int rows = std::min(block, len - i0);
        const int k0 = w > 0 ? std::max(0, i0 - w) : 0;
        const int k1 = w > 0 ? std::min(len, i0 + rows + w) : len;
        const int keys = k1 - k0;
        dnnl_sgemm('N', 'T', rows, keys, d, scale, q + static_cast<size_t>(i0) * ld, ld,
                   k + static_cast<size_t>(k0) * ld, ld, 0.0f, scores, keys);
        for (int r = 0; r < rows; ++r) {
          const int i = i0 + r;
          float* si = scores + static_cast<size_t>(r) * keys;
          if (bias.table) {
            // Key j's bias: entry j - i + span - 1 of the head's row.
            const float* row = bias.table + static_cast<size_t>(head) * (2 * bias.span - 1) +
                               bias.span - 1 - i + k0;
#pragma omp simd
            for (int j = 0; j < keys; ++j) si[j] += row[j];
          }
          // Keys beyond the window get probability 0.
          const int lo = w > 0 ? std::max(k0, i - w) - k0 : 0;
          const int hi = w > 0 ? std::min(k1, i + w + 1) - k0 : keys;
          SoftmaxRow(si + lo, hi - lo);
          std::fill(si, si + lo, 0.0f);
          std::fill(si + hi, si + keys, 0.0f);
        }
        dnnl_sgemm('N', 'N', rows, d, keys, 1.0f, scores, keys, v + static_cast<size_t>(k0) * ld,
                   ld, 0.0f, ctx + static_cast<size_t>(begin + i0) * h + head * d, h);
      }
    }
  }
}

}  // namespace bertrt::cpu

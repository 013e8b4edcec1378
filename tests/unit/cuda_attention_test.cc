// Each attention kernel (general, mma.sync, wgmma, TMA, first queries) against a float64
// reference on the host, at head dims 32/64/128, ragged lengths that end
// inside and on tile edges, and batches large and small enough to pick each
// kernel's block sizes. The engine tests check attention only through whole
// models; here a kernel is pinned (AttentionArgs::kernel), so that one whose
// layout is wrong cannot hide behind another.
#if BERTRT_HAVE_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/ops/attention.h"
#include "backends/cuda/ops/launch.h"
#include "bertrt/devices.h"
#include "cuda_test_util.h"

namespace bertrt::cuda {
namespace {

using test_util::DeviceBuffer;
using test_util::FromBits;
using test_util::ToBits;

struct Problem {
  int heads, head_dim;
  std::vector<int> lengths;
};

// Random packed Q | K | V rows in precision p, and their values.
struct Inputs {
  Problem problem;
  Precision p;
  std::vector<int32_t> cu;
  std::vector<uint16_t> qkv;
  std::vector<double> val;
  int tokens() const { return cu.back(); }
  int hidden() const { return problem.heads * problem.head_dim; }
};

Inputs MakeInputs(const Problem& pr, Precision p, uint32_t seed) {
  Inputs in{pr, p, {0}, {}, {}};
  for (int len : pr.lengths) in.cu.push_back(in.cu.back() + len);
  std::mt19937 rng(seed);
  // Scores of a few units, as in trained models: peaked rows and flat ones.
  std::normal_distribution<float> dist(0.0f, 1.5f);
  in.qkv.resize(static_cast<size_t>(in.tokens()) * 3 * in.hidden());
  in.val.resize(in.qkv.size());
  for (size_t i = 0; i < in.qkv.size(); ++i) {
    in.qkv[i] = ToBits(dist(rng), p);
    in.val[i] = FromBits(in.qkv[i], p);
  }
  return in;
}

// A relative position bias table as AttentionArgs::position_bias lays it out.
struct PositionBias {
  std::vector<float> table;  // [heads][2 * span - 1]
  int span;
  double At(int head, int query, int key) const {
    return table[static_cast<size_t>(head) * (2 * span - 1) + span - 1 + key - query];
  }
};

// softmax(Q K^T / sqrt(d) [+ bias]) V in float64, [tokens, hidden]; with a
// local window, over the keys within `window` positions of each query.
std::vector<double> Reference(const Inputs& in, int window = 0,
                              const PositionBias* bias = nullptr) {
  const int hidden = in.hidden(), d = in.problem.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> out(static_cast<size_t>(in.tokens()) * hidden), w;
  auto at = [&](int token, int part, int h) {
    return &in.val[static_cast<size_t>(token) * 3 * hidden + part * hidden + h * d];
  };
  for (size_t s = 0; s + 1 < in.cu.size(); ++s) {
    const int b = in.cu[s], len = in.cu[s + 1] - b;
    w.resize(len);
    for (int h = 0; h < in.problem.heads; ++h)
      for (int i = 0; i < len; ++i) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < len; ++j) {
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += at(b + i, 0, h)[c] * at(b + j, 1, h)[c];
          const double score = dot * scale + (bias ? bias->At(h, i, j) : 0.0);
          mx = std::max(mx, w[j] = window && std::abs(i - j) > window ? -INFINITY : score);
        }
        for (int j = 0; j < len; ++j) sum += (w[j] = std::exp(w[j] - mx));
        double* o = &out[static_cast<size_t>(b + i) * hidden + h * d];
        for (int j = 0; j < len; ++j)
          for (int c = 0; c < d; ++c) o[c] += w[j] / sum * at(b + j, 2, h)[c];
      }
  }
  return out;
}

// Runs `kernel` and returns max |got - want| over every output element (an
// element left unwritten reads as NaN and counts as infinite), or over the
// rows of the sequences `checked` marks. With window_seqs, the sequences
// (in.cu's, in order) go to the kernel in windows of that many sequences each.
double MaxError(const Inputs& in, const std::vector<double>& want, AttentionKernel kernel,
                const GpuInfo& gpu, int sm_count, const std::vector<bool>* checked = nullptr,
                const std::vector<int>* window_seqs = nullptr, int local_window = 0,
                const PositionBias* bias = nullptr) {
  const int seqs = static_cast<int>(in.cu.size()) - 1;
  int max_len = 0;
  for (int len : in.problem.lengths) max_len = std::max(max_len, len);
  std::vector<int32_t> by_length(2 * seqs), row_bounds(in.tokens());
  if (window_seqs)
    LayOutWindows(in.cu.data(), seqs, *window_seqs, by_length.data(), row_bounds.data());
  else
    LongestFirst(in.cu.data(), seqs, by_length.data());
  const size_t out_bytes = want.size() * 2;
  DeviceBuffer d_qkv(in.qkv.size() * 2), d_ctx(out_bytes), d_order(by_length.size() * 4),
      d_bounds(row_bounds.size() * 4), d_bias(bias ? bias->table.size() * 4 : 4);
  if (bias)
    cudaMemcpy(d_bias.ptr, bias->table.data(), bias->table.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_qkv.ptr, in.qkv.data(), in.qkv.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(d_order.ptr, by_length.data(), by_length.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_bounds.ptr, row_bounds.data(), row_bounds.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(d_ctx.ptr, 0xff, out_bytes);
  AttentionArgs a{d_qkv.ptr,   static_cast<const int32_t*>(d_order.ptr),
                  seqs,        max_len,
                  in.hidden(), in.problem.heads,
                  d_ctx.ptr,   gpu.compute_capability,
                  sm_count};
  a.kernel = kernel;
  a.tokens = in.tokens();
  if (window_seqs) a.row_bounds = static_cast<const int32_t*>(d_bounds.ptr);
  a.local_window = local_window;
  if (bias) {
    a.position_bias = static_cast<const float*>(d_bias.ptr);
    a.bias_span = bias->span;
  }
  const Status st = Attention(in.p, a, Stream{nullptr, false});
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> ctx(want.size());
  cudaMemcpy(ctx.data(), d_ctx.ptr, out_bytes, cudaMemcpyDeviceToHost);
  double worst = 0;
  const size_t row = in.hidden();
  for (size_t i = 0; i < ctx.size(); ++i) {
    if (checked) {
      const int token = static_cast<int>(i / row);
      const auto seq = std::upper_bound(in.cu.begin(), in.cu.end(), token) - in.cu.begin() - 1;
      if (!(*checked)[seq]) continue;
    }
    const double got = FromBits(ctx[i], in.p);
    worst = std::max(worst, std::isfinite(got) ? std::abs(got - want[i]) : INFINITY);
  }
  return worst;
}

class CudaAttentionTest : public test_util::GpuTest {
 protected:
  // The kernels this GPU and build can run, the general path first.
  std::vector<AttentionKernel> Kernels() const {
    std::vector<AttentionKernel> k{AttentionKernel::kGeneral};
    if (gpu_.compute_capability >= 80) k.push_back(AttentionKernel::kMmaSync);
    if (gpu_.compute_capability == 90 && WgmmaAttentionBuilt()) {
      k.push_back(AttentionKernel::kWgmma);
      k.push_back(AttentionKernel::kTma);
    }
    return k;
  }
};

const char* KernelName(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kGeneral:
      return "general";
    case AttentionKernel::kMmaSync:
      return "mma.sync";
    case AttentionKernel::kWgmma:
      return "wgmma";
    case AttentionKernel::kTma:
      return "tma";
    default:
      return "auto";
  }
}

TEST_F(CudaAttentionTest, EveryKernelMatchesAFloat64Reference) {
  // Small batches take the smaller blocks; the many-sequence batches the
  // 128-query ones (at 132 SMs: > 132 blocks of 128 queries).
  std::vector<Problem> problems;
  for (int d : {32, 64, 128}) {
    problems.push_back({2, d, {1, 7, 64, 65, 130, 2}});
    problems.push_back({4, d, {384, 1,   200, 63,  129, 17, 256, 64,  3,   100, 311, 128, 5,
                               77,  192, 33,  250, 40,  9,  120, 300, 66,  150, 31,  200, 90,
                               128, 45,  257, 12,  180, 99, 64,  8,   140, 222, 70,  160, 36}});
  }
  problems.push_back({12, 64, {128}});  // BERT-base at batch 1
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    // Outputs are averages of V (|V| within ~6): rounding P and the output
    // to 11 (fp16) or 8 (bf16) bits bounds the error.
    const double tolerance = p == Precision::kFp16 ? 1e-2 : 6e-2;
    for (const Problem& pr : problems) {
      const Inputs in = MakeInputs(pr, p, 5);
      const std::vector<double> want = Reference(in);
      for (AttentionKernel k : Kernels()) {
        const double err = MaxError(in, want, k, gpu_, sm_count_);
        EXPECT_LE(err, tolerance) << KernelName(k) << " " << PrecisionName(p) << " head dim "
                                  << pr.head_dim << ", " << pr.lengths.size() << " sequences";
      }
    }
  }
}

// Local attention (ModernBERT's local layers): each query sees the keys
// within +-w of it, on the general and the mma.sync kernels, with windows
// narrower than a key tile and wider, sequences shorter than the window and
// long ones whose blocks skip most tiles, at head dims 32/64/128 and block
// sizes from 32 to 128 queries. Their rows' first tiles may hold no key they
// see: a NaN there would reach the output.
TEST_F(CudaAttentionTest, LocalWindowsMatchAFloat64Reference) {
  std::vector<AttentionKernel> kernels{AttentionKernel::kGeneral};
  if (gpu_.compute_capability >= 80) kernels.push_back(AttentionKernel::kMmaSync);
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const double tolerance = p == Precision::kFp16 ? 1e-2 : 6e-2;
    for (int d : {32, 64, 128})
      for (int window : {4, 64, 100})
        for (const std::vector<int>& lengths :
             {std::vector<int>{1000}, std::vector<int>{3, 700, 65, 129, 1, 64, 260},
              std::vector<int>(40, 300)}) {
          const Inputs in = MakeInputs({2, d, lengths}, p, 23);
          const std::vector<double> want = Reference(in, window);
          for (AttentionKernel k : kernels) {
            const double err =
                MaxError(in, want, k, gpu_, sm_count_, nullptr, nullptr, window);
            EXPECT_LE(err, tolerance) << KernelName(k) << " " << PrecisionName(p) << " head dim "
                                      << d << ", window " << window << ", " << lengths.size()
                                      << " sequences";
          }
        }
  }
  // The wgmma and TMA kernels take no window, nor a relative position bias.
  if (gpu_.compute_capability == 90 && WgmmaAttentionBuilt()) {
    AttentionArgs a{nullptr, nullptr, 1, 8, 64, 1, nullptr, gpu_.compute_capability, sm_count_};
    a.tokens = 8;
    a.local_window = 4;
    for (AttentionKernel k : {AttentionKernel::kWgmma, AttentionKernel::kTma}) {
      a.kernel = k;
      const Status st = Attention(Precision::kFp16, a, Stream{nullptr, false});
      EXPECT_FALSE(st.ok()) << KernelName(k);
      EXPECT_NE(st.ToString().find("local window"), std::string::npos) << st.ToString();
      a.local_window = 0;
      const float bias = 0.0f;  // never read: the call is refused first
      a.position_bias = &bias;
      a.bias_span = 1;
      const Status biased = Attention(Precision::kFp16, a, Stream{nullptr, false});
      EXPECT_FALSE(biased.ok()) << KernelName(k);
      a.position_bias = nullptr;
      a.local_window = 4;
    }
  }
}

// MPNet's relative position bias (a table over every key - query distance
// of a 514-position model, values of a trained model's +-2 size) on the
// general and the mma.sync kernels, at head dims 32/64/128, with sequences
// up to the table's span and ragged batches.
TEST_F(CudaAttentionTest, RelativePositionBiasMatchesAFloat64Reference) {
  std::vector<AttentionKernel> kernels{AttentionKernel::kGeneral};
  if (gpu_.compute_capability >= 80) kernels.push_back(AttentionKernel::kMmaSync);
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const double tolerance = p == Precision::kFp16 ? 1e-2 : 6e-2;
    for (int d : {32, 64, 128})
      for (const std::vector<int>& lengths :
           {std::vector<int>{514}, std::vector<int>{3, 300, 65, 129, 1, 64, 200},
            std::vector<int>(40, 128)}) {
        const int heads = 2;
        PositionBias bias{std::vector<float>(static_cast<size_t>(heads) * (2 * 514 - 1)), 514};
        for (float& b : bias.table) b = value(rng);
        const Inputs in = MakeInputs({heads, d, lengths}, p, 31);
        const std::vector<double> want = Reference(in, 0, &bias);
        for (AttentionKernel k : kernels) {
          const double err = MaxError(in, want, k, gpu_, sm_count_, nullptr, nullptr, 0, &bias);
          EXPECT_LE(err, tolerance) << KernelName(k) << " " << PrecisionName(p) << " head dim "
                                    << d << ", " << lengths.size() << " sequences";
        }
      }
  }
}

// A sequence whose V rows overflowed to inf (a broken fp16 model, or one
// pushed past fp16's range) spoils its own outputs only: the kernels read
// past a sequence's end only into tiles they mask and zero. (With a unit per
// sequence; in an attention window of several it reaches its neighbours:
// attention_tma.cuh.)
TEST_F(CudaAttentionTest, InfiniteValuesStayInTheirSequence) {
  const std::vector<std::vector<int>> batches = {{100, 37, 130, 5, 64, 200, 3, 129},
                                                 {384, 50, 300, 7, 250}};
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const double tolerance = p == Precision::kFp16 ? 1e-2 : 6e-2;
    for (const std::vector<int>& lengths : batches) {
      Inputs in = MakeInputs({2, 64, lengths}, p, 9);
      // Every other sequence, from the second, gets V = +inf.
      std::vector<bool> checked(lengths.size(), true);
      const uint16_t inf_bits = ToBits(INFINITY, p);
      const int hidden = in.hidden();
      for (size_t s = 1; s < lengths.size(); s += 2) {
        checked[s] = false;
        for (int token = in.cu[s]; token < in.cu[s + 1]; ++token)
          for (int c = 0; c < hidden; ++c) {
            const size_t i = static_cast<size_t>(token) * 3 * hidden + 2 * hidden + c;
            in.qkv[i] = inf_bits;
            in.val[i] = INFINITY;
          }
      }
      const std::vector<double> want = Reference(in);
      for (AttentionKernel k : Kernels()) {
        const double err = MaxError(in, want, k, gpu_, sm_count_, &checked);
        EXPECT_LE(err, tolerance) << KernelName(k) << " " << PrecisionName(p) << ", "
                                  << lengths.size() << " sequences";
      }
    }
  }
}

// Keys past a sequence's first tile whose scores tower over every earlier
// one, as a trained model's [SEP] may: the TMA kernel exponentiates later
// tiles against the max of the earlier ones (attention_tma.cuh), so such a
// key makes probabilities that P's type cannot hold (2^30 at K = 3 here,
// which it renormalizes) or that overflow fp32 (2^200 and more at K = 20,
// whose scores it recomputes). Queries are positive so that the key beats
// every one of them; other sequences keep their own keys (one towering in
// its first tile). Every kernel, head dims 32/64/128, sequences of 2 and 3
// key tiles (the TMA kernel's two consumers and three).
TEST_F(CudaAttentionTest, ScoresFarAboveTheEarlierTilesMaxMatchAFloat64Reference) {
  struct Tower {
    int seq, key;
    float k;  // every dim of the key's K row
  };
  const std::vector<Tower> towers = {{0, 150, 3.0f},  {0, 280, 20.0f}, {1, 200, 3.0f},
                                     {2, 130, 20.0f}, {3, 5, 20.0f},   {4, 140, 3.0f},
                                     {4, 260, 3.5f}};
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const double tolerance = p == Precision::kFp16 ? 1e-2 : 6e-2;
    for (int d : {32, 64, 128}) {
      for (const std::vector<int>& lengths :
           std::vector<std::vector<int>>{{384, 250, 200, 60, 300}, {290, 250, 200, 60, 300}}) {
        Inputs in = MakeInputs({2, d, lengths}, p, 13);
        const int hidden = in.hidden();
        auto set = [&](int token, int part, int c, float v) {
          const size_t i = static_cast<size_t>(token) * 3 * hidden + part * hidden + c;
          in.qkv[i] = ToBits(v, p);
          in.val[i] = FromBits(in.qkv[i], p);
        };
        for (int token = 0; token < in.tokens(); ++token)
          for (int c = 0; c < hidden; ++c)
            set(token, 0, c, std::abs(static_cast<float>(in.val[token * 3 * hidden + c])));
        for (const Tower& tw : towers)
          for (int c = 0; c < hidden; ++c) set(in.cu[tw.seq] + tw.key, 1, c, tw.k);
        const std::vector<double> want = Reference(in);
        for (AttentionKernel k : Kernels()) {
          const double err = MaxError(in, want, k, gpu_, sm_count_);
          EXPECT_LE(err, tolerance) << KernelName(k) << " " << PrecisionName(p) << " head dim " << d
                                    << ", longest " << lengths[0];
        }
      }
    }
  }
}

// Sequences of at most kAttentionWindow tokens packed into windows (as the
// engine lays them out: PackWindows' order, LayOutWindows' table) on the TMA
// kernel: each row attends to its own sequence only, whatever shares its
// window, at head dims 32/64/128, windows of one sequence or many, lengths
// on and off tile edges.
TEST_F(CudaAttentionTest, PackedWindowsMatchAFloat64Reference) {
  if (gpu_.compute_capability != 90 || !WgmmaAttentionBuilt())
    GTEST_SKIP() << "the TMA kernel needs an sm_90 GPU and a build with 90a";
  std::mt19937 rng(21);
  std::vector<std::vector<int>> batches = {{1, 127, 128, 64, 64, 65, 63, 2, 16, 112, 8, 120},
                                           std::vector<int>(200, 1)};
  for (int n : {40, 333}) {
    std::vector<int> lengths(n);
    for (int& len : lengths) len = std::uniform_int_distribution<int>(1, kAttentionWindow)(rng);
    batches.push_back(lengths);
  }
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const double tolerance = p == Precision::kFp16 ? 1e-2 : 6e-2;
    for (int d : {32, 64, 128})
      for (const std::vector<int>& lengths : batches) {
        const WindowPacking packing = PackWindows(lengths);
        std::vector<int> laid_out;
        for (int s : packing.order) laid_out.push_back(lengths[s]);
        const Inputs in = MakeInputs({2, d, laid_out}, p, 13);
        const std::vector<double> want = Reference(in);
        const double err = MaxError(in, want, AttentionKernel::kTma, gpu_, sm_count_, nullptr,
                                    &packing.window_seqs);
        EXPECT_LE(err, tolerance) << PrecisionName(p) << " head dim " << d << ", " << lengths.size()
                                  << " sequences in " << packing.window_seqs.size() << " windows";
      }
  }
  // A table of windows for a kernel that does not take them is an error.
  AttentionArgs a{nullptr, nullptr, 1, 8, 64, 1, nullptr, gpu_.compute_capability, sm_count_};
  int32_t bounds = 0;
  a.row_bounds = &bounds;
  a.kernel = AttentionKernel::kWgmma;
  a.tokens = 8;
  const Status st = Attention(Precision::kFp16, a, Stream{nullptr, false});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("windows"), std::string::npos) << st.ToString();
}

// The first-query kernel (the last layer of a model whose head reads only
// first tokens) against the reference's first rows, relative to each
// output's size: it computes in fp32, so only the output's rounding (11 or
// 8 bits) is allowed. Head dims in 16-byte vectors and one not (36), empty
// sequences (a zero row), lengths past one block's threads; Q, K and V from
// attention's packed rows, and (split) Q of the first tokens alone with K
// and V in rows of their own, as the engine's last layer lays them out.
TEST_F(CudaAttentionTest, FirstQueriesMatchAFloat64Reference) {
  const std::vector<Problem> problems = {{4, 32, {1, 7, 0, 64, 65, 130, 2, 512, 300}},
                                         {4, 64, {129, 0, 1, 255, 256, 3}},
                                         {2, 128, {384, 5, 100}},
                                         {12, 64, {128}},  // BERT-base at batch 1
                                         {3, 36, {5, 0, 77, 200}}};
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const double tolerance = p == Precision::kFp16 ? 1.0 / 1024 : 1.0 / 128;
    for (const Problem& pr : problems) {
      const Inputs in = MakeInputs(pr, p, 17);
      const std::vector<double> want = Reference(in);
      const int seqs = static_cast<int>(pr.lengths.size()), hidden = in.hidden();
      const int max_len = *std::max_element(pr.lengths.begin(), pr.lengths.end());
      const size_t out_count = static_cast<size_t>(seqs) * hidden;
      // The split layout: each sequence's first query (zeros for an empty
      // one), and K | V rows.
      const int tokens = in.tokens();
      std::vector<uint16_t> q(out_count, 0), kv(static_cast<size_t>(tokens) * 2 * hidden);
      for (int s = 0; s < seqs; ++s)
        if (pr.lengths[s] > 0)
          std::copy_n(&in.qkv[static_cast<size_t>(in.cu[s]) * 3 * hidden], hidden,
                      &q[static_cast<size_t>(s) * hidden]);
      for (int t = 0; t < tokens; ++t)
        std::copy_n(&in.qkv[static_cast<size_t>(t) * 3 * hidden + hidden], 2 * hidden,
                    &kv[static_cast<size_t>(t) * 2 * hidden]);
      DeviceBuffer d_qkv(in.qkv.size() * 2), d_q(q.size() * 2), d_kv(kv.size() * 2),
          d_cu(in.cu.size() * 4), d_out(out_count * 2);
      cudaMemcpy(d_qkv.ptr, in.qkv.data(), in.qkv.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(d_q.ptr, q.data(), q.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(d_kv.ptr, kv.data(), kv.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(d_cu.ptr, in.cu.data(), in.cu.size() * 4, cudaMemcpyHostToDevice);
      for (const bool split : {false, true}) {
        cudaMemset(d_out.ptr, 0xff, out_count * 2);  // unwritten: NaN
        const auto* qkv = static_cast<const uint16_t*>(d_qkv.ptr);
        const FirstQueryAttentionArgs a{split ? d_q.ptr : d_qkv.ptr,
                                        split ? hidden : 3 * hidden,
                                        split,
                                        split ? d_kv.ptr : static_cast<const void*>(qkv + hidden),
                                        split ? 2 * hidden : 3 * hidden,
                                        static_cast<const int32_t*>(d_cu.ptr),
                                        seqs,
                                        max_len,
                                        hidden,
                                        pr.heads,
                                        d_out.ptr,
                                        {}};
        const Status st = FirstQueryAttention(p, a, Stream{nullptr, false});
        ASSERT_TRUE(st.ok()) << st.ToString();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint16_t> out(out_count);
        cudaMemcpy(out.data(), d_out.ptr, out_count * 2, cudaMemcpyDeviceToHost);
        double worst = 0;
        for (int s = 0; s < seqs; ++s)
          for (int c = 0; c < hidden; ++c) {
            const double w =
                pr.lengths[s] > 0 ? want[static_cast<size_t>(in.cu[s]) * hidden + c] : 0;
            const double got = FromBits(out[static_cast<size_t>(s) * hidden + c], p);
            worst =
                std::max(worst, std::isfinite(got) ? std::abs(got - w) / std::max(std::abs(w), 1.0)
                                                   : INFINITY);
          }
        EXPECT_LE(worst, tolerance) << PrecisionName(p) << " head dim " << pr.head_dim << ", "
                                    << seqs << " sequences" << (split ? ", split layout" : "");
      }
    }
  }
}

TEST_F(CudaAttentionTest, AForcedKernelTheGpuOrPrecisionRulesOutIsAnError) {
  AttentionArgs a{nullptr, nullptr, 1, 8, 64, 1, nullptr, gpu_.compute_capability, sm_count_};
  a.kernel = AttentionKernel::kMmaSync;
  EXPECT_FALSE(Attention(Precision::kFp32, a, Stream{nullptr, false}).ok());
  a.hidden = 96;  // head dim 96: no tensor-core kernel
  for (AttentionKernel k : {AttentionKernel::kWgmma, AttentionKernel::kTma}) {
    a.kernel = k;
    EXPECT_FALSE(Attention(Precision::kFp16, a, Stream{nullptr, false}).ok()) << KernelName(k);
  }
  a.hidden = 64;
  if (gpu_.compute_capability != 90 || !WgmmaAttentionBuilt()) {
    for (AttentionKernel k : {AttentionKernel::kWgmma, AttentionKernel::kTma}) {
      a.kernel = k;
      const Status st = Attention(Precision::kFp16, a, Stream{nullptr, false});
      EXPECT_FALSE(st.ok()) << KernelName(k);
      EXPECT_NE(st.ToString().find("90a"), std::string::npos) << st.ToString();
    }
  } else {
    // The TMA kernel's copies need the rows of qkv.
    a.kernel = AttentionKernel::kTma;
    const Status st = Attention(Precision::kFp16, a, Stream{nullptr, false});
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("tokens"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace bertrt::cuda
#endif  // BERTRT_HAVE_CUDA

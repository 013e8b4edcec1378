// The op harness: every op of the vocabulary (ops/encoder_ops.h) run through
// a backend's ops class, in each precision it computes in, against float64
// references (op_reference.h), as CTranslate2's ops tests and llama.cpp's
// test-backend-ops hold their backends. A backend joins by a harness class
// (CpuHarness below) that makes its ops for a batch, moves host arrays in and
// out of its memory and makes its weights from host arrays; the tests are
// written once over it.
//
// Bounds: the references take the inputs as the backend holds them (rounded
// to its precision), so what is measured is the op's own error. fp32: a few
// float32 roundings over the op's reductions, normwise (2e-6, as the CPU's
// kernel tests hold them); 16-bit: a multiple of the format's unit roundoff
// (the output's rounding and, for attention, the probabilities').
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_encoder_ops.h"
#include "bertrt/precision.h"
#include "model/rotary.h"
#include "op_reference.h"

#if BERTRT_HAVE_CUDA
#include <memory>

#include "backends/cuda/engine/cuda_encoder_ops.h"
#include "backends/cuda/gemm/gemm.h"
#include "backends/cuda/gemm/int8_gemm.h"
#include "backends/cuda/ops/attention.h"
#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/util/cuda_check.h"
#include "core/half.h"
#include "cuda_test_util.h"
#endif

namespace bertrt {
namespace {

using test::NormRelErr;
using test::Random;

// A Linear's host weights: W [out, in] and b [out] (b empty: none).
struct HostLinear {
  std::vector<float> w, b;
  int in = 0, out = 0;
};

HostLinear RandomLinear(int in, int out, std::mt19937* rng) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(in));
  return {Random(size_t(out) * in, rng, -scale, scale), Random(out, rng), in, out};
}

// What the ops read of the model besides their arguments.
struct HostTables {
  std::vector<float> word, position, type, gamma, beta;  // embeddings
  std::vector<float> relative_bias;                      // empty: none
  std::vector<float> rotary_global, rotary_local;        // empty: none
};

// The CPU backend under the harness: fp32 in host memory.
class CpuHarness {
 public:
  using Ops = cpu::EncoderOps;
  static std::vector<Precision> Precisions() { return {Precision::kFp32}; }

  // Ops for `batch` of a model shaped by `config`, reading `tables`.
  void Start(const ModelConfig& config, const RaggedBatch& batch, const HostTables& tables,
             Precision) {
    config_ = config;
    batch_ = batch;
    tables_.embeddings = {tables.word.data(),
                          tables.position.empty() ? nullptr : tables.position.data(),
                          tables.type.data(), tables.gamma.data(), tables.beta.data()};
    tables_.relative_bias = tables.relative_bias;
    tables_.rotary = {tables.rotary_global, tables.rotary_local};
    if (!matmul_ready_) {
      ASSERT_TRUE(matmul_.Init().ok());
      matmul_ready_ = true;
    }
    workspace_.Reserve(config_, batch_, 0, kThreads, Ops::kMaskedLmChunkTokens);
    ops_.emplace(config_, tables_, batch_, workspace_, &matmul_, kThreads);
  }
  Ops& ops() { return *ops_; }

  // Memory of `count` activations in the compute precision, set to `values`.
  float* Alloc(const std::vector<float>& values) { return &arrays_.emplace_back(values)[0]; }
  float* Alloc(size_t count) { return Alloc(std::vector<float>(count, -7.0f)); }
  std::vector<float> Read(const float* from, size_t count) {
    return std::vector<float>(from, from + count);
  }
  // The same for fp32 arrays (the heads'): one kind of memory here.
  float* AllocFloat(const std::vector<float>& values) { return Alloc(values); }
  float* AllocFloat(size_t count) { return Alloc(count); }
  std::vector<float> ReadFloat(const float* from, size_t count) { return Read(from, count); }

  cpu::Linear MakeLinear(const HostLinear& l) {
    Tensor w = Tensor::ZerosF32({l.out, l.in}), b = Tensor::ZerosF32({l.out});
    std::copy(l.w.begin(), l.w.end(), w.mutable_f32());
    std::copy(l.b.begin(), l.b.end(), b.mutable_f32());
    auto packed = cpu::PackLinear({&w}, {&b}, l.in, "test");
    EXPECT_TRUE(packed.ok());
    auto linear = cpu::Linear::Create(std::move(*packed), &matmul_);
    EXPECT_TRUE(linear.ok()) << linear.status().ToString();
    return std::move(*linear);
  }
  cpu::Linear MakeSmallLinear(const HostLinear& l) { return MakeLinear(l); }
  // For the CPU's other GEMM precisions (bf16, int8, fp8: a Linear's own).
  cpu::MatmulContext* matmul() { return &matmul_; }
  ops::Norm MakeNorm(const std::vector<float>& gamma, const std::vector<float>& beta) {
    return {AllocFloat(gamma), AllocFloat(beta)};
  }
  // Everything enqueued is done (nothing is enqueued here).
  Status Finish() { return Status::Ok(); }

 private:
  static constexpr int kThreads = 2;
  ModelConfig config_;
  RaggedBatch batch_;
  cpu::ModelTables tables_;
  cpu::MatmulContext matmul_;
  bool matmul_ready_ = false;
  cpu::Workspace workspace_;
  std::optional<Ops> ops_;
  std::deque<std::vector<float>> arrays_;
};

#if BERTRT_HAVE_CUDA
// The CUDA backend under the harness: fp32, fp16 and bf16 on the first GPU,
// the batch staged as the engine stages one (without padding or windows).
class CudaHarness {
 public:
  using Ops = cuda::EncoderOps;
  static bool Available() {
    auto gpus = ListGpus();
    return gpus.ok() && !gpus->empty();
  }
  static std::vector<Precision> Precisions() {
    return {Precision::kFp32, Precision::kFp16, Precision::kBf16};
  }

  ~CudaHarness() {
    if (stream_) cudaStreamDestroy(stream_);
  }

  // Before Start: Tuning's fused_quantization for the ops made there.
  void UseFusedQuantization(bool on) { tuning_.fused_quantization = on; }
  int compute_capability() const { return cc_; }

  void Start(const ModelConfig& config, const RaggedBatch& batch, const HostTables& tables,
             Precision p) {
    if (!stream_) {
      auto gpus = ListGpus();
      ASSERT_TRUE(gpus.ok() && !gpus->empty());
      gpu_ = (*gpus)[0];
      ASSERT_EQ(cudaSetDevice(gpu_.index), cudaSuccess);
      ASSERT_EQ(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, gpu_.index),
                cudaSuccess);
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
      auto cc = cuda::KernelComputeCapability(stream_);
      ASSERT_TRUE(cc.ok());
      cc_ = std::min(gpu_.compute_capability, *cc);
    }
    p_ = p;
    config_ = config;
    options_.precision = p;
    gemm_ = std::make_unique<cuda::LtGemm>();
    ASSERT_TRUE(gemm_->Init(p, cuda::kGemmWorkspaceBytes, gpu_.name, false).ok());
    const bool overlap = tuning_.overlap_kernel_launches && cc_ >= 90;
    linear_ = std::make_unique<cuda::LinearLayers>(*gemm_, p, cc_, sm_count_, tuning_.splitk_gemms,
                                                   tuning_.fused_gelu_gemm, overlap);
    weights_ = {};
    if (!tables.word.empty()) {
      weights_.word = Alloc(tables.word);
      if (!tables.position.empty()) weights_.position = Alloc(tables.position);
      weights_.type = Alloc(tables.type);
      weights_.forward.embedding_norm = MakeNorm(tables.gamma, tables.beta);
    }
    if (!tables.relative_bias.empty()) weights_.relative_bias = AllocFloat(tables.relative_bias);
    if (!tables.rotary_global.empty()) {
      weights_.rotary_global = AllocFloat(tables.rotary_global);
      weights_.rotary_local =
          tables.rotary_local.empty() ? weights_.rotary_global : AllocFloat(tables.rotary_local);
    }
    context_.emplace(cuda::OpsContext{config_, options_, tuning_, weights_, *linear_, overlap});
    shape_ = {batch.num_tokens(), batch.num_seqs(), batch.max_len, false};
    std::vector<int32_t> host(cuda::IntCount(shape_), 0);
    const cuda::BatchInts at = cuda::LayOutInts(host.data(), shape_);
    std::copy(batch.input_ids.begin(), batch.input_ids.end(), at.ids);
    std::copy(batch.token_type_ids.begin(), batch.token_type_ids.end(), at.types);
    std::copy(batch.cu_seqlens.begin(), batch.cu_seqlens.end(), at.cu);
    std::copy(batch.pool_start.begin(), batch.pool_start.end(), at.pool_start);
    cuda::LongestFirst(at.cu, shape_.seqs, at.by_length);
    int32_t* ints = static_cast<int32_t*>(Bytes(host.size() * sizeof(int32_t)));
    ASSERT_EQ(cudaMemcpy(ints, host.data(), host.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
              cudaSuccess);
    workspace_ = {};
    workspace_.ints = ints;
    // Room for an 8-bit Linear's input, as an 8-bit engine's pool makes.
    workspace_.input8 = Bytes(size_t(shape_.tokens) * kMaxInput8Width);
    workspace_.input8_scales = static_cast<float*>(Bytes(size_t(shape_.tokens) * 4));
    workspace_.input8_zeros = static_cast<int32_t*>(Bytes(size_t(shape_.tokens) * 4));
    const cuda::BatchInts device = cuda::LayOutInts(ints, shape_);
    attention_ = cuda::AttentionArgs{
        nullptr,           device.by_length, shape_.seqs, shape_.max_len, config_.hidden_size,
        config_.num_heads, nullptr,          cc_,         sm_count_};
    attention_.tokens = shape_.tokens;
    attention_.allow_tma = tuning_.tma_attention;
    attention_.position_bias = weights_.relative_bias;
    attention_.bias_span = config_.max_positions();
    ops_.emplace(*context_, shape_, workspace_, attention_, stream_, nullptr);
  }
  Ops& ops() { return *ops_; }

  void* Alloc(const std::vector<float>& values) {
    void* d = Bytes(values.size() * Element());
    if (p_ == Precision::kFp32) {
      EXPECT_EQ(cudaMemcpy(d, values.data(), values.size() * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
    } else {
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = cuda::test_util::ToBits(values[i], p_);
      EXPECT_EQ(cudaMemcpy(d, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    }
    return d;
  }
  void* Alloc(size_t count) { return Alloc(std::vector<float>(count, -7.0f)); }
  std::vector<float> Read(const void* from, size_t count) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<float> out(count);
    if (p_ == Precision::kFp32) {
      EXPECT_EQ(cudaMemcpy(out.data(), from, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    } else {
      std::vector<uint16_t> bits(count);
      EXPECT_EQ(cudaMemcpy(bits.data(), from, count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < count; ++i) out[i] = cuda::test_util::FromBits(bits[i], p_);
    }
    return out;
  }
  float* AllocFloat(const std::vector<float>& values) {
    float* d = static_cast<float*>(Bytes(values.size() * 4));
    EXPECT_EQ(cudaMemcpy(d, values.data(), values.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  float* AllocFloat(size_t count) { return AllocFloat(std::vector<float>(count, -7.0f)); }
  std::vector<float> ReadFloat(const float* from, size_t count) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<float> out(count);
    EXPECT_EQ(cudaMemcpy(out.data(), from, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

  cuda::DeviceLinear MakeLinear(const HostLinear& l) {
    return {Alloc(l.w), Alloc(l.b), l.in, l.out};
  }
  // An fp8 model's Linear: the weight in E4M3 with one scale (its largest |w|
  // to 448), its input's calibrated scale given.
  cuda::DeviceLinear MakeFp8Linear(const HostLinear& l, float input_scale) {
    float w_max = 0;
    for (float v : l.w) w_max = std::max(w_max, std::abs(v));
    const float scale = w_max / 448;
    std::vector<uint8_t> codes(l.w.size());
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = FloatToE4M3(l.w[i] / scale);
    void* w8 = Bytes(codes.size());
    EXPECT_EQ(cudaMemcpy(w8, codes.data(), codes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    cuda::DeviceLinear d{nullptr, Alloc(l.b), l.in, l.out};
    d.w8 = w8, d.weight_scale = scale, d.input_scale = input_scale;
    return d;
  }
  // An int8 model's Linear from the CPU engine's int8 operands (`q`).
  cuda::DeviceLinear MakeInt8Linear(const QuantizedLinear& q, const std::vector<float>& bias) {
    const int in = static_cast<int>(q.weights.dim(1)), out = static_cast<int>(q.weights.dim(0));
    const std::vector<int32_t> sums = Int8WeightSums(q);
    const std::vector<float> mult = Int8InputMultipliers(q);
    auto copy = [&](const void* host, size_t bytes) {
      void* d = Bytes(bytes);
      EXPECT_EQ(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
      return d;
    };
    cuda::DeviceLinear d{nullptr, Alloc(bias), in, out};
    d.w8 = copy(q.weights.raw(), q.weights.nbytes());
    d.format = QuantFormat::kInt8;
    d.input_scale = q.input_scale;
    d.weight_scales = static_cast<const float*>(copy(q.scales.f32(), size_t(out) * 4));
    d.weight_sums = static_cast<const int32_t*>(copy(sums.data(), size_t(out) * 4));
    d.input_multipliers = static_cast<const float*>(copy(mult.data(), size_t(in) * 4));
    return d;
  }
  static constexpr int kMaxInput8Width = 4096;
  cuda::DeviceSmallLinear MakeSmallLinear(const HostLinear& l) {
    return {AllocFloat(l.w), l.b.empty() ? nullptr : AllocFloat(l.b), l.in, l.out};
  }
  ops::Norm MakeNorm(const std::vector<float>& gamma, const std::vector<float>& beta) {
    return {AllocFloat(gamma), AllocFloat(beta)};
  }
  Status Finish() {
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Status::Ok();
  }

 private:
  size_t Element() const { return p_ == Precision::kFp32 ? 4 : 2; }
  void* Bytes(size_t bytes) {
    return buffers_.emplace_back(std::make_unique<cuda::test_util::DeviceBuffer>(bytes + 16))->ptr;
  }

  GpuInfo gpu_;
  int sm_count_ = 0, cc_ = 0;
  cudaStream_t stream_ = nullptr;
  Precision p_ = Precision::kFp32;
  ModelConfig config_;
  CudaEngineOptions options_;
  cuda::Tuning tuning_;
  std::unique_ptr<cuda::LtGemm> gemm_;
  std::unique_ptr<cuda::LinearLayers> linear_;
  cuda::DeviceWeights weights_;
  std::optional<cuda::OpsContext> context_;
  cuda::Shape shape_{};
  cuda::Workspace workspace_{};
  cuda::AttentionArgs attention_{};
  std::optional<Ops> ops_;
  std::deque<std::unique_ptr<cuda::test_util::DeviceBuffer>> buffers_;
};
#endif

double UnitRoundoff(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return 0x1p-24;
    case Precision::kFp16:
      return 0x1p-11;
    case Precision::kBf16:
      return 0x1p-8;
  }
  return 1.0;
}

// The normwise bound of an op whose result is rounded once to `p` after
// float32 work: 2e-6 in fp32, `roundings` unit roundoffs in 16 bits.
double Bound(Precision p, double roundings = 2.0) {
  return p == Precision::kFp32 ? 2e-6 : roundings * UnitRoundoff(p);
}

std::vector<double> Widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// A small model's shape: 128 wide in 4 heads of 32 (a head size the tensor
// core kernels take), sequences of 1, 2, 7 and 64 tokens.
ModelConfig SmallConfig() {
  ModelConfig c;
  c.hidden_size = 128;
  c.num_heads = 4;
  c.intermediate_size = 96;
  c.num_layers = 1;
  c.vocab_size = 50;
  c.max_position_embeddings = 80;
  c.type_vocab_size = 2;
  c.layer_norm_eps = 1e-12f;
  c.takes_token_types = true;
  return c;
}

RaggedBatch SmallBatch(std::mt19937* rng, int vocab,
                       const std::vector<int>& lengths = {1, 2, 7, 64}) {
  RaggedBatch b;
  for (int len : lengths) {
    std::vector<int32_t> ids(len), types(len);
    for (int i = 0; i < len; ++i) ids[i] = (*rng)() % vocab, types[i] = i >= len / 2;
    b.Add(ids, types);
  }
  return b;
}

template <class Harness>
class OpsHarness : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (requires { Harness::Available(); })
      if (!Harness::Available()) GTEST_SKIP() << "no usable GPU";
  }
  // Starts the backend's ops on the small batch in precision p.
  void Start(Precision p, const ModelConfig& config = SmallConfig(),
             const HostTables& tables = {}, const std::vector<int>& lengths = {1, 2, 7, 64}) {
    config_ = config;
    batch_ = SmallBatch(&rng_, config.vocab_size, lengths);
    tables_ = tables;
    harness_.Start(config_, batch_, tables_, p);
  }
  // `values` as the backend holds them in its compute precision.
  std::vector<float> Rounded(const std::vector<float>& values) {
    return harness_.Read(harness_.Alloc(values), values.size());
  }
  int tokens() const { return batch_.num_tokens(); }
  int seqs() const { return batch_.num_seqs(); }
  int h() const { return config_.hidden_size; }

  Harness harness_;
  std::mt19937 rng_{17};
  ModelConfig config_;
  RaggedBatch batch_;
  HostTables tables_;
};

#if BERTRT_HAVE_CUDA
using Backends = ::testing::Types<CpuHarness, CudaHarness>;
#else
using Backends = ::testing::Types<CpuHarness>;
#endif
TYPED_TEST_SUITE(OpsHarness, Backends);

TYPED_TEST(OpsHarness, LayerNormInPlaceAndApart) {
  for (Precision p : TypeParam::Precisions()) {
    this->Start(p);
    auto& o = this->harness_.ops();
    const int rows = this->tokens(), h = this->h();
    const std::vector<float> x = this->Rounded(Random(size_t(rows) * h, &this->rng_, -3, 5));
    const std::vector<float> gamma = Random(h, &this->rng_), beta = Random(h, &this->rng_);
    std::vector<double> want = Widen(x);
    for (int r = 0; r < rows; ++r)
      test::RefLayerNorm(&want[size_t(r) * h], h, gamma.data(), beta.data(), 1e-12);
    for (bool in_place : {false, true}) {
      auto* in = this->harness_.Alloc(x);
      auto* out = in_place ? in : this->harness_.Alloc(x.size());
      ASSERT_TRUE(o.LayerNorm(in, out, rows, this->harness_.MakeNorm(gamma, beta)).ok());
      ASSERT_TRUE(this->harness_.Finish().ok());
      EXPECT_LT(NormRelErr(this->harness_.Read(out, x.size()), want), Bound(p))
          << PrecisionName(p) << (in_place ? " in place" : " apart");
      if (!in_place) EXPECT_EQ(this->harness_.Read(in, x.size()), x) << "input kept";
    }
  }
}

// Each tail: none, each activation, the residual from a tensor apart and
// from y itself.
TYPED_TEST(OpsHarness, LinearWithEachTail) {
  for (Precision p : TypeParam::Precisions()) {
    this->Start(p);
    auto& hr = this->harness_;
    const int rows = this->tokens(), in = 128, out = 192;
    const HostLinear host = RandomLinear(in, out, &this->rng_);
    const auto weights = hr.MakeLinear(host);
    const std::vector<float> x = this->Rounded(Random(size_t(rows) * in, &this->rng_));
    const std::vector<float> r = this->Rounded(Random(size_t(rows) * out, &this->rng_));
    // The reference reads the weights as the backend holds them.
    const std::vector<double> xw =
        test::RefLinear(x, rows, in, this->Rounded(host.w), this->Rounded(host.b), out);
    using Tail =
        ops::Tail<typename TypeParam::Ops::ConstBuf, typename TypeParam::Ops::LinearWeights>;
    struct Case {
      const char* name;
      std::optional<HiddenAct> act;
      int residual;  // 0 none, 1 apart, 2 y itself
    };
    for (const Case& c :
         {Case{"bias", {}, 0}, Case{"gelu", HiddenAct::kGelu, 0},
          Case{"gelu_tanh", HiddenAct::kGeluTanh, 0}, Case{"relu", HiddenAct::kRelu, 0},
          Case{"residual apart", {}, 1}, Case{"residual in place", {}, 2}}) {
      auto* xs = hr.Alloc(x);
      auto* y = c.residual == 2 ? hr.Alloc(r) : hr.Alloc(r.size());
      auto* res = c.residual == 1 ? hr.Alloc(r) : y;
      const Tail tail = c.act        ? Tail::Activation(*c.act)
                        : c.residual ? Tail::Residual(res)
                                     : Tail{};
      ASSERT_TRUE(hr.ops().Linear("test", weights, xs, rows, y, tail).ok()) << c.name;
      ASSERT_TRUE(hr.Finish().ok());
      std::vector<double> want = xw;
      for (size_t i = 0; i < want.size(); ++i) {
        if (c.act) want[i] = test::RefHidden(want[i], *c.act);
        if (c.residual) want[i] += r[i];
      }
      EXPECT_LT(NormRelErr(hr.Read(y, want.size()), want), Bound(p, 4))
          << PrecisionName(p) << " " << c.name;
    }
  }
}

// Word + position within its sequence + type, normalized; without a
// position table (rotary models) word + type alone.
TYPED_TEST(OpsHarness, EmbedLayerNormPositionsWithinEachSequence) {
  for (Precision p : TypeParam::Precisions()) {
    for (bool positions : {true, false}) {
      const ModelConfig c = SmallConfig();
      const int h = c.hidden_size;
      HostTables t;
      t.word = Random(size_t(c.vocab_size) * h, &this->rng_);
      if (positions) t.position = Random(size_t(c.max_position_embeddings) * h, &this->rng_);
      t.type = Random(size_t(c.type_vocab_size) * h, &this->rng_);
      t.gamma = Random(h, &this->rng_);
      t.beta = Random(h, &this->rng_);
      this->Start(p, c, t);
      auto& hr = this->harness_;
      auto* out = hr.Alloc(size_t(this->tokens()) * h);
      ASSERT_TRUE(hr.ops().EmbedLayerNorm(out).ok());
      ASSERT_TRUE(hr.Finish().ok());
      const RaggedBatch& b = this->batch_;
      const std::vector<float> word = this->Rounded(t.word), type = this->Rounded(t.type),
                               pos = positions ? this->Rounded(t.position) : std::vector<float>{};
      std::vector<double> want(size_t(this->tokens()) * h);
      for (int s = 0; s < this->seqs(); ++s)
        for (int k = b.cu_seqlens[s]; k < b.cu_seqlens[s + 1]; ++k) {
          for (int i = 0; i < h; ++i)
            want[size_t(k) * h + i] = double{word[size_t(b.input_ids[k]) * h + i]} +
                                      (positions ? pos[size_t(k - b.cu_seqlens[s]) * h + i] : 0.0) +
                                      type[size_t(b.token_type_ids[k]) * h + i];
          test::RefLayerNorm(&want[size_t(k) * h], h, t.gamma.data(), t.beta.data(), 1e-12);
        }
      EXPECT_LT(NormRelErr(hr.Read(out, want.size()), want), Bound(p))
          << PrecisionName(p) << (positions ? " with positions" : " without");
    }
  }
}

// Per sequence and head; with MPNet's relative position bias; with a local
// window (ModernBERT's local layers) narrower than the longest sequence.
TYPED_TEST(OpsHarness, AttentionPlainBiasedAndWindowed) {
  for (Precision p : TypeParam::Precisions()) {
    struct Case {
      const char* name;
      bool bias;
      int window;
    };
    for (const Case& k : {Case{"plain", false, 0}, Case{"relative bias", true, 0},
                          Case{"local window", false, 5}}) {
      ModelConfig c = SmallConfig();
      HostTables t;
      const int span = c.max_positions(), heads = c.num_heads, h = c.hidden_size;
      if (k.bias) {
        c.relative_attention_buckets = 32;
        t.relative_bias = Random(size_t(heads) * (2 * span - 1), &this->rng_, -2, 2);
      }
      this->Start(p, c, t);
      auto& hr = this->harness_;
      const std::vector<float> qkv =
          this->Rounded(Random(size_t(this->tokens()) * 3 * h, &this->rng_, -2, 2));
      auto* q = hr.Alloc(qkv);
      auto* ctx = hr.Alloc(size_t(this->tokens()) * h);
      typename TypeParam::Ops::Layer layer{};
      ASSERT_TRUE(hr.ops().Attention(layer, k.window, q, ctx).ok()) << k.name;
      ASSERT_TRUE(hr.Finish().ok());
      const std::vector<double> want = test::RefAttention(qkv, this->batch_.cu_seqlens, h, heads,
                                                          t.relative_bias, span, k.window);
      EXPECT_LT(NormRelErr(hr.Read(ctx, want.size()), want), Bound(p, 8))
          << PrecisionName(p) << " " << k.name;
    }
  }
}

// BERT's head size (64) over a batch large enough that the CUDA engine's
// own choice (AttentionKernel::kAuto) is the wgmma kernel fed by TMA on an
// sm_90 GPU (the small batch above takes mma.sync): sequences of 1 to 300.
TYPED_TEST(OpsHarness, AttentionAtBertsHeadSizeOverLongSequences) {
  for (Precision p : TypeParam::Precisions()) {
    ModelConfig c = SmallConfig();
    c.hidden_size = 768;
    c.num_heads = 12;
    c.max_position_embeddings = 512;
    this->Start(p, c, {}, {1, 37, 200, 300});
    auto& hr = this->harness_;
    const int h = c.hidden_size;
    const std::vector<float> qkv =
        this->Rounded(Random(size_t(this->tokens()) * 3 * h, &this->rng_, -2, 2));
    auto* q = hr.Alloc(qkv);
    auto* ctx = hr.Alloc(size_t(this->tokens()) * h);
    typename TypeParam::Ops::Layer layer{};
    ASSERT_TRUE(hr.ops().Attention(layer, 0, q, ctx).ok());
    ASSERT_TRUE(hr.Finish().ok());
    const std::vector<double> want =
        test::RefAttention(qkv, this->batch_.cu_seqlens, h, c.num_heads);
    EXPECT_LT(NormRelErr(hr.Read(ctx, want.size()), want), Bound(p, 8)) << PrecisionName(p);
  }
}

// Q and K rotated by position within the sequence, V left alone; the local
// layers' table where they have a theta of their own.
TYPED_TEST(OpsHarness, RotaryByPositionWithGlobalAndLocalTables) {
  for (Precision p : TypeParam::Precisions()) {
    const ModelConfig c = SmallConfig();
    const int h = c.hidden_size, d = c.head_dim();
    HostTables t;
    t.rotary_global = RotaryTable(10000.0f, d, c.max_positions());
    t.rotary_local = RotaryTable(160000.0f, d, c.max_positions());
    this->Start(p, c, t);
    for (bool local : {false, true}) {
      auto& hr = this->harness_;
      const std::vector<float> qkv =
          this->Rounded(Random(size_t(this->tokens()) * 3 * h, &this->rng_));
      auto* buf = hr.Alloc(qkv);
      ASSERT_TRUE(hr.ops().Rotary(buf, local).ok());
      ASSERT_TRUE(hr.Finish().ok());
      const std::vector<double> want =
          test::RefRotary(qkv, this->batch_.cu_seqlens, h, c.num_heads, local ? 160000.0 : 10000.0);
      // float32 angles, as transformers takes them: up to 64 * 2^-24 off.
      EXPECT_LT(NormRelErr(hr.Read(buf, qkv.size()), want), std::max(1e-5, Bound(p)))
          << PrecisionName(p) << (local ? " local" : " global");
    }
  }
}

TYPED_TEST(OpsHarness, GatedActivationMultipliesTheActivatedHalfByTheGate) {
  for (Precision p : TypeParam::Precisions()) {
    for (HiddenAct act : {HiddenAct::kGelu, HiddenAct::kGeluTanh}) {
      ModelConfig c = SmallConfig();
      c.gated_ffn = true;
      c.hidden_act = act;
      this->Start(p, c);
      auto& hr = this->harness_;
      const int rows = this->tokens(), inter = c.intermediate_size;
      const std::vector<float> in =
          this->Rounded(Random(size_t(rows) * 2 * inter, &this->rng_, -4, 4));
      auto* out = hr.Alloc(size_t(rows) * inter);
      ASSERT_TRUE(hr.ops().GatedActivation(hr.Alloc(in), rows, out).ok());
      ASSERT_TRUE(hr.Finish().ok());
      std::vector<double> want(size_t(rows) * inter);
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < inter; ++i)
          want[size_t(r) * inter + i] = test::RefHidden(in[size_t(r) * 2 * inter + i], act) *
                                        in[size_t(r) * 2 * inter + inter + i];
      EXPECT_LT(NormRelErr(hr.Read(out, want.size()), want), Bound(p, 4)) << PrecisionName(p);
    }
  }
}

TYPED_TEST(OpsHarness, GatherFirstTokensAndConversions) {
  for (Precision p : TypeParam::Precisions()) {
    this->Start(p);
    auto& hr = this->harness_;
    const int h = this->h(), n = this->seqs();
    const std::vector<float> x = this->Rounded(Random(size_t(this->tokens()) * h, &this->rng_));
    auto* first = hr.Alloc(size_t(n) * h);
    ASSERT_TRUE(hr.ops().GatherFirstTokens(hr.Alloc(x), first).ok());
    float* widened = hr.AllocFloat(size_t(n) * h);
    ASSERT_TRUE(hr.ops().ConvertToFloat(first, widened, size_t(n) * h).ok());
    auto* back = hr.Alloc(size_t(n) * h);
    ASSERT_TRUE(hr.ops().ConvertFromFloat(widened, back, size_t(n) * h).ok());
    ASSERT_TRUE(hr.Finish().ok());
    std::vector<float> want;
    for (int s = 0; s < n; ++s) {
      const auto row = x.begin() + size_t(this->batch_.cu_seqlens[s]) * h;
      want.insert(want.end(), row, row + h);
    }
    EXPECT_EQ(hr.Read(first, want.size()), want) << PrecisionName(p);
    EXPECT_EQ(hr.ReadFloat(widened, want.size()), want) << PrecisionName(p);
    EXPECT_EQ(hr.Read(back, want.size()), want) << PrecisionName(p);
  }
}

// Every sentence-transformers mode, each into its columns of a wider row,
// over every token and from prompts' ends (pool_start).
TYPED_TEST(OpsHarness, PoolSequencesEveryModeAndFromPromptEnds) {
  for (Precision p : TypeParam::Precisions()) {
    for (bool from_prompt_ends : {false, true}) {
      this->Start(p);
      if (from_prompt_ends) this->batch_.pool_start = {0, 1, 3, 10};
      this->harness_.Start(this->config_, this->batch_, this->tables_, p);
      auto& hr = this->harness_;
      const int h = this->h(), n = this->seqs();
      const std::vector<float> x = this->Rounded(Random(size_t(this->tokens()) * h, &this->rng_));
      auto* xs = hr.Alloc(x);
      const Pooling modes[] = {Pooling::kCls,         Pooling::kMean,         Pooling::kMax,
                               Pooling::kMeanSqrtLen, Pooling::kWeightedMean, Pooling::kLastToken};
      const int stride = 6 * h;
      float* out = hr.AllocFloat(size_t(n) * stride);
      for (int k = 0; k < 6; ++k)
        ASSERT_TRUE(hr.ops().PoolSequences(xs, modes[k], out + k * h, stride).ok());
      ASSERT_TRUE(hr.Finish().ok());
      const std::vector<float> got = hr.ReadFloat(out, size_t(n) * stride);
      for (int k = 0; k < 6; ++k) {
        const std::vector<double> want =
            test::RefPool(x, this->batch_.cu_seqlens, this->batch_.pool_start, h, modes[k]);
        std::vector<float> mine;
        for (int s = 0; s < n; ++s)
          mine.insert(mine.end(), got.begin() + size_t(s) * stride + k * h,
                      got.begin() + size_t(s) * stride + (k + 1) * h);
        EXPECT_LT(NormRelErr(mine, want), Bound(Precision::kFp32))
            << PrecisionName(p) << " " << PoolingName(modes[k])
            << (from_prompt_ends ? " from the prompts' ends" : "");
      }
    }
  }
}

// The heads' fp32 steps: an activation on the way to fp32 (the pooler's),
// the Dense modules' activations, the small Linears from activations and from
// fp32 rows, LayerNorm and L2 normalization of fp32 rows.
TYPED_TEST(OpsHarness, HeadSteps) {
  for (Precision p : TypeParam::Precisions()) {
    this->Start(p);
    auto& hr = this->harness_;
    auto& o = hr.ops();
    const int n = this->seqs(), h = this->h();
    const std::vector<float> x = this->Rounded(Random(size_t(n) * h, &this->rng_, -3, 3));
    for (DenseActivation act :
         {DenseActivation::kIdentity, DenseActivation::kTanh, DenseActivation::kRelu,
          DenseActivation::kGelu, DenseActivation::kSigmoid}) {
      std::vector<double> want = Widen(x);
      for (double& v : want) v = test::RefDense(v, act);
      float* to = hr.AllocFloat(x.size());
      ASSERT_TRUE(o.ActivateToFloat(hr.Alloc(x), to, x.size(), act).ok());
      float* in_place = hr.AllocFloat(x);
      ASSERT_TRUE(o.DenseActivation(in_place, x.size(), act).ok());
      ASSERT_TRUE(hr.Finish().ok());
      EXPECT_LT(NormRelErr(hr.ReadFloat(to, x.size()), want), Bound(Precision::kFp32))
          << PrecisionName(p) << " activate to fp32 " << static_cast<int>(act);
      EXPECT_LT(NormRelErr(hr.ReadFloat(in_place, x.size()), want), Bound(Precision::kFp32))
          << PrecisionName(p) << " dense activation " << static_cast<int>(act);
    }
    const HostLinear head = RandomLinear(h, 3, &this->rng_);
    const auto small = hr.MakeSmallLinear(head);
    const std::vector<double> logits = test::RefLinear(x, n, h, head.w, head.b, 3);
    float* from_act = hr.AllocFloat(size_t(n) * 3);
    float* from_f32 = hr.AllocFloat(size_t(n) * 3);
    ASSERT_TRUE(o.SmallLinear(small, hr.Alloc(x), n, from_act).ok());
    ASSERT_TRUE(o.SmallLinearFloat(small, hr.AllocFloat(x), n, from_f32).ok());
    const std::vector<float> gamma = Random(h, &this->rng_), beta = Random(h, &this->rng_);
    float* normed = hr.AllocFloat(x);
    ASSERT_TRUE(o.LayerNormFloat(normed, n, hr.MakeNorm(gamma, beta)).ok());
    float* unit = hr.AllocFloat(x);
    ASSERT_TRUE(o.L2Normalize(unit, n, h).ok());
    ASSERT_TRUE(hr.Finish().ok());
    EXPECT_LT(NormRelErr(hr.ReadFloat(from_act, logits.size()), logits), Bound(Precision::kFp32))
        << PrecisionName(p);
    EXPECT_LT(NormRelErr(hr.ReadFloat(from_f32, logits.size()), logits), Bound(Precision::kFp32))
        << PrecisionName(p);
    std::vector<double> want_norm = Widen(x), want_unit = Widen(x);
    for (int r = 0; r < n; ++r) {
      test::RefLayerNorm(&want_norm[size_t(r) * h], h, gamma.data(), beta.data(), 1e-12);
      double sq = 0;
      for (int i = 0; i < h; ++i) sq += want_unit[size_t(r) * h + i] * want_unit[size_t(r) * h + i];
      for (int i = 0; i < h; ++i) want_unit[size_t(r) * h + i] /= std::max(std::sqrt(sq), 1e-12);
    }
    EXPECT_LT(NormRelErr(hr.ReadFloat(normed, x.size()), want_norm), Bound(Precision::kFp32));
    EXPECT_LT(NormRelErr(hr.ReadFloat(unit, x.size()), want_unit), Bound(Precision::kFp32));
  }
}

// SPLADE's pooling, fed in chunks that cut sequences apart, after ZeroFloat.
TYPED_TEST(OpsHarness, SpladePoolAcrossChunks) {
  for (Precision p : TypeParam::Precisions()) {
    for (bool sum : {false, true}) {
      for (bool twice : {false, true}) {
        ModelConfig c = SmallConfig();
        c.vocab_size = 300;  // more columns than one 256-column block
        c.splade_sum = sum;
        c.splade_log1p_twice = twice;
        this->Start(p, c);
        auto& hr = this->harness_;
        const int vocab = c.vocab_size, t = this->tokens(), n = this->seqs();
        const std::vector<float> logits =
            this->Rounded(Random(size_t(t) * vocab, &this->rng_, -2, 4));
        float* out = hr.AllocFloat(size_t(n) * vocab);
        ASSERT_TRUE(hr.ops().ZeroFloat(out, size_t(n) * vocab).ok());
        auto* all = hr.Alloc(logits);
        // Chunks of 5 tokens: every sequence but the first cut somewhere.
        for (int first = 0; first < t; first += 5)
          ASSERT_TRUE(hr.ops()
                          .SpladePool(hr.ops().At(all, size_t(first) * vocab), first,
                                      std::min(5, t - first), out)
                          .ok());
        ASSERT_TRUE(hr.Finish().ok());
        const std::vector<double> want =
            test::RefSplade(logits, this->batch_.cu_seqlens, vocab, sum, twice);
        EXPECT_LT(NormRelErr(hr.ReadFloat(out, want.size()), want), Bound(Precision::kFp32))
            << PrecisionName(p) << " sum " << sum << " twice " << twice;
      }
    }
  }
}

// The fast paths, where a backend has them: each sequence's first query's
// attention alone (Q inside qkv, and Q by sequence behind K | V as the split
// query lays it out), and a Linear over a range of its outputs.
TYPED_TEST(OpsHarness, FastPathsFirstQueryAttentionAndLinearOutputs) {
  using Ops = typename TypeParam::Ops;
  if constexpr (!Ops::kFirstQueryAttention || !Ops::kSplitQuery) {
    GTEST_SKIP() << "the backend has no first-query attention or split query";
  } else {
    for (Precision p : TypeParam::Precisions()) {
      this->Start(p);
      auto& hr = this->harness_;
      auto& o = hr.ops();
      const int h = this->h(), n = this->seqs(), t = this->tokens();
      const std::vector<int32_t>& cu = this->batch_.cu_seqlens;
      const std::vector<float> qkv = this->Rounded(Random(size_t(t) * 3 * h, &this->rng_, -2, 2));
      const std::vector<double> full = test::RefAttention(qkv, cu, h, this->config_.num_heads);
      std::vector<double> want;
      for (int s = 0; s < n; ++s)
        want.insert(want.end(), full.begin() + size_t(cu[s]) * h,
                    full.begin() + size_t(cu[s] + 1) * h);
      auto* packed = hr.Alloc(qkv);
      auto* out = hr.Alloc(size_t(n) * h);
      ASSERT_TRUE(
          o.FirstQueryAttention(nullptr, packed, 3 * h, false, o.At(packed, h), 3 * h, out).ok());
      EXPECT_LT(NormRelErr(hr.Read(out, want.size()), want), Bound(p, 8))
          << PrecisionName(p) << " packed";
      // K | V rows of 2h, then the first tokens' Q by sequence.
      std::vector<float> kv, q;
      for (int k = 0; k < t; ++k)
        kv.insert(kv.end(), qkv.begin() + size_t(k) * 3 * h + h,
                  qkv.begin() + size_t(k + 1) * 3 * h);
      for (int s = 0; s < n; ++s)
        q.insert(q.end(), qkv.begin() + size_t(cu[s]) * 3 * h,
                 qkv.begin() + size_t(cu[s]) * 3 * h + h);
      auto* split_out = hr.Alloc(size_t(n) * h);
      ASSERT_TRUE(
          o.FirstQueryAttention(nullptr, hr.Alloc(q), h, true, hr.Alloc(kv), 2 * h, split_out)
              .ok());
      EXPECT_LT(NormRelErr(hr.Read(split_out, want.size()), want), Bound(p, 8))
          << PrecisionName(p) << " split";

      const HostLinear host = RandomLinear(h, 3 * h, &this->rng_);
      const std::vector<float> x = this->Rounded(Random(size_t(t) * h, &this->rng_));
      const std::vector<double> all =
          test::RefLinear(x, t, h, this->Rounded(host.w), this->Rounded(host.b), 3 * h);
      auto* y = hr.Alloc(size_t(t) * 2 * h);
      ASSERT_TRUE(o.LinearOutputs("test", hr.MakeLinear(host), h, 2 * h, hr.Alloc(x), t, y).ok());
      ASSERT_TRUE(hr.Finish().ok());
      std::vector<double> part;
      for (int r = 0; r < t; ++r)
        part.insert(part.end(), all.begin() + size_t(r) * 3 * h + h,
                    all.begin() + size_t(r + 1) * 3 * h);
      EXPECT_LT(NormRelErr(hr.Read(y, part.size()), part), Bound(p, 4))
          << PrecisionName(p) << " outputs h..3h";
    }
  }
}

// The CPU engine's encoder Linears in the precisions it runs them in besides
// fp32 (--precision bf16, int8, fp8), through the op interface, against the
// float64 product of the fp32 operands; each the normwise bound of its
// operands' rounding: 4 unit roundoffs of the format (bf16's and int8's
// 2^-8, E4M3's 2^-4). Skipped where this CPU has no bf16 kernels.
TEST(OpsHarnessCpu, LinearInBf16AndEightBits) {
  CpuHarness hr;
  std::mt19937 rng(23);
  const ModelConfig config = SmallConfig();
  const RaggedBatch batch = SmallBatch(&rng, config.vocab_size);
  hr.Start(config, batch, {}, Precision::kFp32);
  const int rows = batch.num_tokens(), in = 128, out = 192;
  const HostLinear host = RandomLinear(in, out, &rng);
  const std::vector<float> x = Random(size_t(rows) * in, &rng);
  const std::vector<double> want = test::RefLinear(x, rows, in, host.w, host.b, out);
  float x_max = 0;
  for (float v : x) x_max = std::max(x_max, std::abs(v));
  struct Case {
    const char* name;
    std::function<Status(cpu::Linear*)> convert;
    double bound;
  };
  const Case cases[] = {
      {"bf16", [&](cpu::Linear* l) { return l->UseBf16(hr.matmul()); },
       Bound(Precision::kBf16, 4)},
      {"int8 per token",
       [&](cpu::Linear* l) { return l->Quantize(QuantFormat::kInt8, 0.0f, hr.matmul()); },
       4 * 0x1p-8},
      {"int8 per tensor",
       [&](cpu::Linear* l) {
         return l->Quantize(QuantFormat::kInt8, x_max / 127, hr.matmul());
       },
       4 * 0x1p-8},
      {"fp8",
       [&](cpu::Linear* l) { return l->Quantize(QuantFormat::kFp8, x_max / 448, hr.matmul()); },
       4 * 0x1p-4}};
  for (const Case& c : cases) {
    cpu::Linear linear = hr.MakeLinear(host);
    const Status converted = c.convert(&linear);
    if (converted.code() == StatusCode::kUnimplemented) {
      std::printf("[ SKIPPED  ] %s: %s\n", c.name, converted.ToString().c_str());
      continue;
    }
    ASSERT_TRUE(converted.ok()) << c.name << ": " << converted.ToString();
    float* y = hr.Alloc(size_t(rows) * out);
    ASSERT_TRUE(hr.ops().Linear("test", linear, hr.Alloc(x), rows, y, {}).ok()) << c.name;
    const double err = NormRelErr(hr.Read(y, want.size()), want);
    EXPECT_LT(err, c.bound) << c.name;
    // Not the fp32 GEMM's answer: the conversion took effect.
    EXPECT_GT(err, 1e-5) << c.name;
  }
}

#if BERTRT_HAVE_CUDA
// An fp8 engine's FFN through the ops: the first Linear with the erf GELU,
// handing its output to the second (Tail::feeds), both in FP8. With
// Tuning::fused_quantization the GELU's pass makes the second's E4M3
// input: the same bytes reach its GEMM, so the same answers bit for bit as
// the separate passes. Both near the float64 product of the fp32 operands
// (each GEMM within 4 of E4M3's unit roundoffs, 2^-4).
TEST(OpsHarnessCuda, Fp8FfnWithTheGelusPassMakingTheNextInput) {
  if (!CudaHarness::Available()) GTEST_SKIP() << "no usable GPU";
  std::mt19937 rng(29);
  const ModelConfig config = SmallConfig();
  const RaggedBatch batch = SmallBatch(&rng, config.vocab_size);
  const int rows = batch.num_tokens(), h = 128, inter = 256;
  const HostLinear in_host = RandomLinear(h, inter, &rng), out_host = RandomLinear(inter, h, &rng);
  const std::vector<float> x = Random(size_t(rows) * h, &rng, -2, 2);
  // The float64 FFN, and the calibrated scales of the two inputs (max / 448).
  std::vector<double> act = test::RefLinear(x, rows, h, in_host.w, in_host.b, inter);
  for (double& v : act) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  const std::vector<float> act_f(act.begin(), act.end());
  const std::vector<double> want = test::RefLinear(act_f, rows, inter, out_host.w, out_host.b, h);
  double x_max = 0, act_max = 0;
  for (float v : x) x_max = std::max<double>(x_max, std::abs(v));
  for (double v : act) act_max = std::max(act_max, std::abs(v));
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    // Separate passes; the GELU's pass quantizing.
    std::vector<float> answers[2];
    for (int fused : {0, 1}) {
      CudaHarness hr;
      hr.UseFusedQuantization(fused > 0);
      hr.Start(config, batch, {}, p);
      if (hr.compute_capability() < 89) GTEST_SKIP() << "FP8 GEMMs need sm_89 or newer";
      const cuda::DeviceLinear ffn_in = hr.MakeFp8Linear(in_host, float(x_max / 448));
      const cuda::DeviceLinear ffn_out = hr.MakeFp8Linear(out_host, float(act_max / 448));
      using Tail = ops::Tail<const void*, cuda::DeviceLinear>;
      void* between = hr.Alloc(size_t(rows) * inter);
      void* y = hr.Alloc(size_t(rows) * h);
      ASSERT_TRUE(hr.ops()
                      .Linear("ffn in", ffn_in, hr.Alloc(x), rows, between,
                              Tail::Activation(HiddenAct::kGelu, &ffn_out))
                      .ok());
      ASSERT_TRUE(hr.ops().Linear("ffn out", ffn_out, between, rows, y, {}).ok());
      ASSERT_TRUE(hr.Finish().ok());
      answers[fused] = hr.Read(y, want.size());
      EXPECT_LT(NormRelErr(answers[fused], want), 8 * 0x1p-4)
          << PrecisionName(p) << " variant " << fused;
    }
    EXPECT_EQ(answers[0], answers[1]) << PrecisionName(p);
  }
}

// An int8 engine's Linear on the GPU (the uint8 quantization pass and the
// int8 GEMM) against the CPU engine's int8 Linear on the same operands and
// the same fp16 inputs, per token and per tensor (with SmoothQuant's
// divisors), each tail: both quantize the input to the same bytes and sum
// the same integers, so they part only by the GPU's fp16 output (its
// rounding, a GELU from a rounded input): within 2^-9 normwise. Widths
// MiniLM's (384 -> 1536) and BERT's (768 -> 2304, 3072 -> 768: the widest
// sums); rows off the 128-row tile.
TEST(OpsHarnessCuda, Int8LinearAnswersAsTheCpuEngines) {
  if (!CudaHarness::Available()) GTEST_SKIP() << "no usable GPU";
  std::mt19937 rng(31);
  const ModelConfig config = SmallConfig();
  const RaggedBatch batch = SmallBatch(&rng, config.vocab_size);
  const int rows = batch.num_tokens();
  CpuHarness cpu;
  cpu.Start(config, batch, {}, Precision::kFp32);
  using CudaTail = ops::Tail<const void*, cuda::DeviceLinear>;
  using CpuTail = ops::Tail<const float*, cpu::Linear>;
  for (auto [in, out] : {std::pair{384, 1536}, std::pair{768, 2304}, std::pair{3072, 768}}) {
    const HostLinear host = RandomLinear(in, out, &rng);
    // Inputs with an outlier column, rounded to fp16 for both engines.
    std::vector<float> x = Random(size_t(rows) * in, &rng, -2, 2);
    for (int r = 0; r < rows; ++r) x[size_t(r) * in + 5] *= 20;
    for (float& v : x) v = cuda::test_util::FromBits(cuda::test_util::ToBits(v, Precision::kFp16),
                                                     Precision::kFp16);
    const std::vector<float> residual = Random(size_t(rows) * out, &rng, -1, 1);
    float x_max = 0;
    for (float v : x) x_max = std::max(x_max, std::abs(v));
    std::vector<float> smoothing(in, 1.0f);
    smoothing[5] = 4.0f;
    for (float input_scale : {0.0f, x_max / 4 / 127}) {
      for (int tail = 0; tail < 3; ++tail) {
        SCOPED_TRACE(std::to_string(in) + " -> " + std::to_string(out) +
                     (input_scale == 0 ? ", per token" : ", per tensor") + ", tail " +
                     std::to_string(tail));
        cpu::Linear linear = cpu.MakeLinear(host);
        ASSERT_TRUE(linear.Quantize(QuantFormat::kInt8, input_scale, cpu.matmul(), smoothing).ok());
        const CpuTail cpu_tail = tail == 0   ? CpuTail{}
                                 : tail == 1 ? CpuTail::Activation(HiddenAct::kGelu)
                                             : CpuTail::Residual(cpu.Alloc(residual));
        float* want_y = cpu.Alloc(size_t(rows) * out);
        ASSERT_TRUE(cpu.ops().Linear("test", linear, cpu.Alloc(x), rows, want_y, cpu_tail).ok());
        const std::vector<float> want = cpu.Read(want_y, size_t(rows) * out);

        CudaHarness hr;
        hr.Start(config, batch, {}, Precision::kFp16);
        if (!cuda::Int8GemmApplies(Precision::kFp16, hr.compute_capability(), in, out))
          GTEST_SKIP() << "the int8 GEMM needs sm_90a code and CUTLASS's headers";
        const cuda::DeviceLinear d = hr.MakeInt8Linear(*linear.QuantizedOperands(), host.b);
        const CudaTail cuda_tail = tail == 0   ? CudaTail{}
                                   : tail == 1 ? CudaTail::Activation(HiddenAct::kGelu)
                                               : CudaTail::Residual(hr.Alloc(residual));
        void* y = hr.Alloc(size_t(rows) * out);
        ASSERT_TRUE(hr.ops().Linear("test", d, hr.Alloc(x), rows, y, cuda_tail).ok());
        ASSERT_TRUE(hr.Finish().ok());
        const std::vector<float> got = hr.Read(y, want.size());
        EXPECT_LT(NormRelErr(got, std::vector<double>(want.begin(), want.end())), 0x1p-9);
      }
    }
  }
}
#endif

}  // namespace
}  // namespace bertrt

// The CUDA engine against the CPU engine on small random models: every head,
// every activation, head dims on both attention paths, lengths up to 512 in
// ragged batches. Skipped where no GPU is visible (CI), except for the checks
// that need none.
#if BERTRT_HAVE_CUDA
#include "bertrt/cuda_engine.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/engine/batch_shape.h"
#include "backends/cuda/engine/tuning.h"
#include "backends/cuda/ops/elementwise.h"
#include "bertrt/devices.h"
#include "bertrt/engine.h"
#include "bertrt/plan.h"
#include "bertrt/self_check.h"

namespace bertrt {
namespace {

struct Spec {
  const char* name;
  int hidden, heads, intermediate;
  HiddenAct act;
  HeadKind head;
  std::vector<Pooling> pooling = {Pooling::kMean};
  bool normalize = false;
  int layers = 2;
  std::vector<DenseSpec> dense = {};  // in_features filled in from the width before
  int truncate_dim = 0;
  bool include_prompt = true;  // false: the batches carry pool starts
};

constexpr int kVocab = 211;
constexpr int kLabels = 3;

Tensor Random(std::vector<int64_t> shape, std::mt19937& rng, float stddev, float mean = 0.0f) {
  Tensor t = Tensor::ZerosF32(std::move(shape));
  std::normal_distribution<float> dist(mean, stddev);
  float* p = t.mutable_f32();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

std::shared_ptr<const Model> MakeModel(const Spec& s, uint32_t seed) {
  std::mt19937 rng(seed);
  auto m = std::make_shared<Model>();
  ModelConfig& c = m->config;
  c.vocab_size = kVocab;
  c.hidden_size = s.hidden;
  c.num_layers = s.layers;
  c.num_heads = s.heads;
  c.intermediate_size = s.intermediate;
  c.max_position_embeddings = 512;
  c.max_seq_length = 512;
  c.type_vocab_size = 2;
  c.hidden_act = s.act;
  c.head = s.head;
  c.num_labels = s.head == HeadKind::kQuestionAnswering ? 2 : kLabels;
  c.pooling_modes = s.pooling;
  c.normalize = s.normalize;
  c.truncate_dim = s.truncate_dim;
  c.include_prompt = s.include_prompt;
  for (DenseSpec d : s.dense) {
    d.in_features = c.dense.empty() ? c.pooled_width() : c.dense.back().out_features;
    c.dense.push_back(d);
  }
  const int64_t h = s.hidden, in = s.intermediate;
  // Q and K scaled so that attention scores have unit spread: with the usual
  // 0.02 the softmax is nearly uniform and would hide indexing mistakes.
  const float qk = 1.0f / std::sqrt(static_cast<float>(h));
  ModelWeights& w = m->weights;
  w.word_embeddings = Random({kVocab, h}, rng, 0.02f);
  w.position_embeddings = Random({512, h}, rng, 0.02f);
  w.token_type_embeddings = Random({2, h}, rng, 0.02f);
  w.emb_ln_gamma = Random({h}, rng, 0.1f, 1.0f);
  w.emb_ln_beta = Random({h}, rng, 0.1f);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    l.query_w = Random({h, h}, rng, qk);
    l.key_w = Random({h, h}, rng, qk);
    l.value_w = Random({h, h}, rng, 0.02f);
    l.query_b = Random({h}, rng, 0.02f);
    l.key_b = Random({h}, rng, 0.02f);
    l.value_b = Random({h}, rng, 0.02f);
    l.attn_out_w = Random({h, h}, rng, 0.02f);
    l.attn_out_b = Random({h}, rng, 0.02f);
    l.attn_ln_gamma = Random({h}, rng, 0.1f, 1.0f);
    l.attn_ln_beta = Random({h}, rng, 0.1f);
    l.ffn_in_w = Random({in, h}, rng, 0.02f);
    l.ffn_in_b = Random({in}, rng, 0.02f);
    l.ffn_out_w = Random({h, in}, rng, 0.02f);
    l.ffn_out_b = Random({h}, rng, 0.02f);
    l.ffn_ln_gamma = Random({h}, rng, 0.1f, 1.0f);
    l.ffn_ln_beta = Random({h}, rng, 0.1f);
    w.layers.push_back(std::move(l));
  }
  if (s.head == HeadKind::kBase || s.head == HeadKind::kSequenceClassification) {
    w.pooler_w = Random({h, h}, rng, 0.02f);
    w.pooler_b = Random({h}, rng, 0.02f);
  }
  if (s.head != HeadKind::kBase && s.head != HeadKind::kSentenceEmbedding) {
    w.classifier_w = Random({c.num_labels, h}, rng, 0.02f);
    w.classifier_b = Random({c.num_labels}, rng, 0.02f);
  }
  for (const DenseSpec& d : c.dense) {
    DenseWeights& dw = w.dense.emplace_back();
    dw.w = Random({d.out_features, d.in_features}, rng, 1.0f / std::sqrt(float(d.in_features)));
    if (d.bias) dw.b = Random({d.out_features}, rng, 0.1f);
  }
  return m;
}

// With prompt_starts, each sequence pools from a token of its own, as texts
// after prompts of different lengths would (include_prompt false).
RaggedBatch MakeBatch(const std::vector<int>& lengths, uint32_t seed, bool prompt_starts = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, kVocab - 1), type(0, 1);
  RaggedBatch b;
  for (int len : lengths) {
    std::vector<int32_t> ids(len), types(len);
    for (int i = 0; i < len; ++i) {
      ids[i] = id(rng);
      types[i] = i < len / 2 ? 0 : type(rng);
    }
    b.Add(ids, types, prompt_starts ? (b.num_seqs() * 7 + 1) % len : 0);
  }
  return b;
}

bool HaveGpu() { return ListGpus().ok(); }

#define SKIP_WITHOUT_GPU() \
  if (!HaveGpu()) GTEST_SKIP() << "no usable GPU: " << ListGpus().status().ToString()

// Outputs that are vectors in a space (compared by direction in fp16/bf16)
// rather than scores (compared element by element).
bool IsEmbedding(const std::string& name) {
  return name == "last_hidden_state" || name == "embedding" || name == "pooler_output";
}

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::max(std::sqrt(aa * bb), 1e-30);
}

// fp32: max |got - want| relative to the output's scale within 1e-4.
// fp16/bf16: cosine per row >= 0.9999 for embeddings, |got - want| <= 1e-2 for scores.
void ExpectClose(const BatchOutputs& got, const BatchOutputs& want, Precision p,
                 const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (const NamedOutput& w : want.outputs) {
    const NamedOutput* g = got.Find(w.name);
    ASSERT_NE(g, nullptr) << what << ": missing " << w.name;
    ASSERT_EQ(g->per_token, w.per_token) << what << " " << w.name;
    ASSERT_EQ(g->width, w.width) << what << " " << w.name;
    ASSERT_EQ(g->data.size(), w.data.size()) << what << " " << w.name;
    double max_err = 0, scale = 1;
    for (size_t i = 0; i < w.data.size(); ++i) {
      max_err = std::max(max_err, std::abs(double(g->data[i]) - w.data[i]));
      scale = std::max(scale, std::abs(double(w.data[i])));
    }
    if (p == Precision::kFp32) {
      EXPECT_LE(max_err / scale, 1e-4) << what << " " << w.name;
    } else if (IsEmbedding(w.name)) {
      double worst = 1;
      for (size_t r = 0; r < w.data.size() / w.width; ++r)
        worst = std::min(worst, Cosine(&g->data[r * w.width], &w.data[r * w.width], w.width));
      EXPECT_GE(worst, 0.9999) << what << " " << w.name;
    } else {
      EXPECT_LE(max_err, 1e-2) << what << " " << w.name;
    }
  }
}

// Sequence s's share of a batch's outputs, as if it had run alone.
BatchOutputs Slice(const BatchOutputs& all, const RaggedBatch& batch, int s) {
  BatchOutputs out;
  for (const NamedOutput& o : all.outputs) {
    NamedOutput part{o.name, o.per_token, o.width, {}};
    const size_t begin = o.per_token ? batch.cu_seqlens[s] : s;
    const size_t end = o.per_token ? batch.cu_seqlens[s + 1] : s + 1;
    part.data.assign(o.data.begin() + begin * o.width, o.data.begin() + end * o.width);
    out.outputs.push_back(std::move(part));
  }
  return out;
}

StatusOr<std::unique_ptr<Engine>> MakeCuda(std::shared_ptr<const Model> m, Precision p,
                                           int max_batch_tokens = 0,
                                           bool erf_gelu_as_tanh = false) {
  CudaEngineOptions o;
  o.precision = p;
  o.max_batch_tokens = max_batch_tokens;
  o.approximate_erf_gelu = erf_gelu_as_tanh;
  return CreateCudaEngine(std::move(m), o);
}

// The small token-classification model of the graph tests.
const Spec kTokCls{"tokcls", 128, 4, 256, HiddenAct::kGelu, HeadKind::kTokenClassification};

// kTokCls (weights from `seed`) on the CPU engine, the reference, and on the
// CUDA engine in precision `p`.
struct CpuAndCuda {
  std::unique_ptr<Engine> cpu, gpu;
};
void MakeCpuAndCuda(uint32_t seed, Precision p, CpuAndCuda* out) {
  auto model = MakeModel(kTokCls, seed);
  auto cpu = CreateCpuEngine(model, {});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto gpu = MakeCuda(model, p);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  out->cpu = std::move(cpu).value();
  out->gpu = std::move(gpu).value();
}

TEST(CudaEngineTest, ParsesPrecision) {
  EXPECT_EQ(*ParsePrecision("fp32"), Precision::kFp32);
  EXPECT_EQ(*ParsePrecision("fp16"), Precision::kFp16);
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBf16);
  EXPECT_EQ(ParsePrecision("int8").status().code(), StatusCode::kInvalidArgument);
}

// Real widths and depths (BERT-base, 768 x 12 layers; BERT-large, 1024 x 24),
// where precision and race bugs show that two layers of a small model hide:
// every precision against the CPU engine in fp32 on a ragged batch up to 384
// tokens, eager and from the graph. fp32 within 1e-4 of the outputs' scale;
// fp16/bf16 at the self-check's thresholds (CheckVerifyThresholds: cosine
// 0.999, every clear argmax). tests/gpu/parity.py holds them to PyTorch's
// own error in each precision.
TEST(CudaEngineTest, RealWidthsAndDepthsMatchTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  const Spec specs[] = {
      {"bert_base", 768, 12, 3072, HiddenAct::kGelu, HeadKind::kSequenceClassification,
       {Pooling::kMean}, false, 12},
      {"bert_large_mean", 1024, 16, 4096, HiddenAct::kGelu, HeadKind::kSentenceEmbedding,
       {Pooling::kMean}, true, 24},
  };
  const RaggedBatch batch = MakeBatch({1, 7, 64, 128, 200, 384, 33, 96}, 21);
  for (const Spec& s : specs) {
    auto model = MakeModel(s, 9);
    auto cpu = CreateCpuEngine(model, {});
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    auto want = (*cpu)->Run(batch, {});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
      auto gpu = MakeCuda(model, p);
      ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
      for (const char* run : {"eager", "graph"}) {
        auto got = (*gpu)->Run(batch, {});
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        auto report = CompareOutputs(DescribeOutputs(*model), batch, *want, *got);
        ASSERT_TRUE(report.ok()) << report.status().ToString();
        const Status within = CheckVerifyThresholds(*report, p);
        EXPECT_TRUE(within.ok()) << s.name << " " << PrecisionName(p) << " " << run << ": "
                                 << within.message() << " (" << DescribeReport(*report) << ")";
        (*gpu)->WaitForBackgroundWork();  // the second run replays the captured graph
      }
    }
  }
}

// The build has code for this GPU's architecture (CMake's default list), so
// the kernels run with every path written for it. A build whose kernels the
// driver compiled from older PTX (the compiler's default compute_75 on an
// H200) ran empty attention bodies and unsynchronized overlapped launches;
// the engine now falls back, and says so in its device().
TEST(CudaEngineTest, KernelsRunAsThisGpusOwnCode) {
  SKIP_WITHOUT_GPU();
  const GpuInfo gpu = ListGpus()->at(0);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  auto cc = cuda::KernelComputeCapability(stream);
  cudaStreamDestroy(stream);
  ASSERT_TRUE(cc.ok()) << cc.status().ToString();
  EXPECT_EQ(*cc, gpu.compute_capability) << "rebuild with the default CMAKE_CUDA_ARCHITECTURES";
  const Spec s{"seqcls", 64, 4, 100, HiddenAct::kGelu, HeadKind::kSequenceClassification};
  auto engine = MakeCuda(MakeModel(s, 1), Precision::kFp16);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->device().find("kernels built for"), std::string::npos)
      << (*engine)->device();
}

TEST(CudaEngineTest, RefusesClearlyWithoutGpu) {
  if (HaveGpu()) GTEST_SKIP() << "a GPU is visible; this checks the error without one";
  const Spec s{"base", 64, 4, 100, HiddenAct::kGelu, HeadKind::kBase};
  auto engine = MakeCuda(MakeModel(s, 1), Precision::kFp16);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(engine.status().message().empty());
}

struct Case {
  Spec spec;
  Precision precision;
  // The erf GELU fused as cuBLASLt's tanh form: held to the same thresholds
  // against the CPU engine's exact erf.
  bool erf_gelu_as_tanh = false;
};

class CudaParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaParityTest, MatchesCpuEngineAndSingleRuns) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  auto model = MakeModel(c.spec, 7);
  auto cpu = CreateCpuEngine(model, {});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto gpu = MakeCuda(model, c.precision, 0, c.erf_gelu_as_tanh);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  if (c.erf_gelu_as_tanh)
    EXPECT_NE((*gpu)->device().find("erf GELU as tanh"), std::string::npos) << (*gpu)->device();
  const RunOptions opts{.last_hidden_state = true};

  const bool starts = !c.spec.include_prompt;
  const RaggedBatch batch = MakeBatch({1, 7, 64, 300, 512, 33, 128, 2}, 11, starts);
  // Enough sequences of at most kAttentionWindow tokens for the TMA kernel
  // (on sm_90, where it applies) to take them packed in windows, reordered
  // on the device and restored in the outputs.
  std::vector<int> short_lengths(72);
  for (size_t i = 0; i < short_lengths.size(); ++i) short_lengths[i] = 1 + (i * 37) % 128;
  const RaggedBatch short_batch = MakeBatch(short_lengths, 12, starts);
  // Each batch with and without hidden states: without them, a head that
  // reads only first tokens (pooler, CLS pooling) has the last layer run on
  // those rows alone. And without the model's Normalize module (a sentence
  // embedding's vector before it; the same run for other heads). The first
  // batch's outputs are kept for the single runs.
  BatchOutputs got, heads;
  const std::pair<const RaggedBatch*, const char*> batches[] = {{&batch, "batched"},
                                                                {&short_batch, "short sequences"}};
  for (const auto& [b, name] : batches)
    for (const RunOptions& o : {opts, RunOptions{}, RunOptions{.normalize = false}}) {
      auto want = (*cpu)->Run(*b, o);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      auto out = (*gpu)->Run(*b, o);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectClose(*out, *want, c.precision,
                  std::string(name) + " vs cpu" + (o.last_hidden_state ? "" : ", heads only") +
                      (o.normalize ? "" : ", before Normalize"));
      if (b == &batch && o.normalize) (o.last_hidden_state ? got : heads) = std::move(*out);
    }

  // Each sequence alone gives its rows of the batch, with and without hidden states.
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const int b = batch.cu_seqlens[s], e = batch.cu_seqlens[s + 1];
    RaggedBatch one;
    one.Add({batch.input_ids.begin() + b, batch.input_ids.begin() + e},
            {batch.token_type_ids.begin() + b, batch.token_type_ids.begin() + e},
            batch.pool_start[s]);
    auto alone = (*gpu)->Run(one, opts);
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    ExpectClose(*alone, Slice(got, batch, s), c.precision,
                "sequence " + std::to_string(s) + " alone vs batched");
    auto alone_heads = (*gpu)->Run(one, {});
    ASSERT_TRUE(alone_heads.ok()) << alone_heads.status().ToString();
    ExpectClose(*alone_heads, Slice(heads, batch, s), c.precision,
                "sequence " + std::to_string(s) + " alone vs batched, heads only");
  }
}

const Spec kSpecs[] = {
    {"seqcls_hd16_gelu", 64, 4, 100, HiddenAct::kGelu, HeadKind::kSequenceClassification},
    {"tokcls_hd32_gelunew", 128, 4, 256, HiddenAct::kGeluTanh, HeadKind::kTokenClassification},
    {"qa_hd64_relu", 256, 4, 512, HiddenAct::kRelu, HeadKind::kQuestionAnswering},
    {"emb_hd128_mean_norm", 256, 2, 100, HiddenAct::kGelu, HeadKind::kSentenceEmbedding,
     {Pooling::kMean}, true},
    {"base_hd32_pooler", 128, 4, 200, HiddenAct::kGelu, HeadKind::kBase},
    {"emb_hd16_max", 64, 4, 100, HiddenAct::kGeluTanh, HeadKind::kSentenceEmbedding,
     {Pooling::kMax}, false},
    {"emb_hd96_cls_norm", 192, 2, 300, HiddenAct::kRelu, HeadKind::kSentenceEmbedding,
     {Pooling::kCls}, true},
    // sentence-transformers' other modes concatenated, two Dense modules (an
    // odd count leaves the rows in the other buffer), Normalize, truncate_dim.
    {"emb_hd64_concat_dense", 128, 2, 200, HiddenAct::kGelu, HeadKind::kSentenceEmbedding,
     {Pooling::kWeightedMean, Pooling::kMeanSqrtLen, Pooling::kLastToken}, true, 2,
     {{.out_features = 96, .bias = false, .activation = DenseActivation::kTanh},
      {.out_features = 80, .activation = DenseActivation::kGelu},
      {.out_features = 72, .activation = DenseActivation::kSigmoid}},
     40},
    {"emb_hd32_max_cls_dense", 64, 2, 100, HiddenAct::kGeluTanh, HeadKind::kSentenceEmbedding,
     {Pooling::kMax, Pooling::kCls}, false, 2,
     {{.out_features = 200, .activation = DenseActivation::kRelu},
      {.out_features = 48, .bias = false, .activation = DenseActivation::kIdentity}}},
    // include_prompt false: every mode from each sequence's own pool start
    // (reordered with the sequences when they are packed in windows), and cls
    // alone, which then reads the first token after the prompt.
    {"emb_hd64_all_modes_no_prompt", 128, 2, 200, HiddenAct::kGelu, HeadKind::kSentenceEmbedding,
     {Pooling::kCls, Pooling::kMax, Pooling::kMean, Pooling::kMeanSqrtLen, Pooling::kWeightedMean,
      Pooling::kLastToken},
     true, 2, {}, 0, false},
    {"emb_hd32_cls_no_prompt", 64, 2, 100, HiddenAct::kGelu, HeadKind::kSentenceEmbedding,
     {Pooling::kCls}, false, 2, {}, 0, false},
    {"seqcls_hd64_gelu", 256, 4, 384, HiddenAct::kGelu, HeadKind::kSequenceClassification},
    {"tokcls_hd96_gelu", 192, 2, 300, HiddenAct::kGelu, HeadKind::kTokenClassification},
    // BERT-base's width: the 16-byte, warp-per-row LayerNorm path.
    {"seqcls_h768_hd64_gelu", 768, 12, 512, HiddenAct::kGelu, HeadKind::kSequenceClassification},
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const Spec& s : kSpecs)
    for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
      cases.push_back({s, p});
      if (s.act == HiddenAct::kGelu && p != Precision::kFp32) cases.push_back({s, p, true});
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaParityTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.spec.name) + "_" +
                                  PrecisionName(info.param.precision) +
                                  (info.param.erf_gelu_as_tanh ? "_tanh_gelu" : "");
                         });

void ExpectIdentical(const BatchOutputs& got, const BatchOutputs& want, const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << what;
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    EXPECT_EQ(got.outputs[i].name, want.outputs[i].name) << what;
    EXPECT_EQ(got.outputs[i].data, want.outputs[i].data) << what << " " << want.outputs[i].name;
  }
}

// A bucket's first batch runs eagerly and has its CUDA graph captured in the
// background; once that is done, later batches replay it: all give the same
// bits, and a different batch of the same bucket (other lengths, other ids)
// replays the graph and still matches the CPU engine, padding rows never
// leaking in.
TEST(CudaEngineTest, GraphReplayMatchesEagerRunsAndServesTheWholeBucket) {
  SKIP_WITHOUT_GPU();
  for (Precision p : {Precision::kFp16, Precision::kFp32}) {
    CpuAndCuda e;
    ASSERT_NO_FATAL_FAILURE(MakeCpuAndCuda(21, p, &e));
    const RunOptions opts{.last_hidden_state = true};
    const std::string what = PrecisionName(p);

    // 105 tokens in 5 sequences and 107 in 5 both pad to 128 tokens in 8
    // sequences, max_len 64: the padding in the last dummy, two empty ones
    // before it.
    const RaggedBatch a = MakeBatch({10, 50, 33, 5, 7}, 31);
    const RaggedBatch b = MakeBatch({20, 40, 30, 5, 12}, 32);
    // So warming one warms the other (what a --warmup-shapes range relies on).
    EXPECT_EQ(e.gpu->ShapeKey(a, opts), e.gpu->ShapeKey(b, opts));
    EXPECT_NE(e.gpu->ShapeKey(a, opts), e.gpu->ShapeKey(a, {}));
    EXPECT_NE(e.gpu->ShapeKey(a, opts), e.gpu->ShapeKey(MakeBatch({10, 50, 33, 5, 70}, 33), opts));
    EXPECT_EQ(e.gpu->KeptShapes(), 256u);
    auto eager = e.gpu->Run(a, opts);
    ASSERT_TRUE(eager.ok()) << eager.status().ToString();
    e.gpu->WaitForBackgroundWork();
    auto captured = e.gpu->Run(a, opts);
    ASSERT_TRUE(captured.ok()) << captured.status().ToString();
    auto replayed = e.gpu->Run(a, opts);
    ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
    ExpectIdentical(*captured, *eager, what + ": captured vs eager");
    ExpectIdentical(*replayed, *eager, what + ": replayed vs eager");
    auto want_a = e.cpu->Run(a, opts);
    ASSERT_TRUE(want_a.ok());
    ExpectClose(*replayed, *want_a, p, what + ": replayed vs cpu");

    auto other = e.gpu->Run(b, opts);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    auto want_b = e.cpu->Run(b, opts);
    ASSERT_TRUE(want_b.ok());
    ExpectClose(*other, *want_b, p, what + ": other batch of the bucket vs cpu");
    auto again = e.gpu->Run(b, opts);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    ExpectIdentical(*again, *other, what + ": other batch replayed twice");
    // Without last_hidden_state the shape is another bucket, with its own graph.
    for (int i = 0; i < 3; ++i) {
      auto plain = e.gpu->Run(a, {});
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      ExpectIdentical(*plain, BatchOutputs{{*eager->Find("logits")}}, what + ": logits only");
      e.gpu->WaitForBackgroundWork();
    }
    EXPECT_EQ(e.gpu->device().find("graphs off"), std::string::npos) << e.gpu->device();
  }
}

// Programmatic dependent launch only moves when kernels launch: every kernel
// still waits for the one before it, so overlapped and plain launches give
// the same bits, eager and replayed from a graph. The models cover every
// kernel of ours (exact GELU, pooler, both head linears, pooling and
// normalization); batch 1 at 128 tokens runs as it is, without dummies.
TEST(CudaEngineTest, OverlappedLaunchesGiveTheSameBitsAsPlainOnes) {
  SKIP_WITHOUT_GPU();
  const Spec specs[] = {kSpecs[9], kTokCls, kSpecs[3], kSpecs[5]};
  for (const Spec& spec : specs) {
    auto model = MakeModel(spec, 71);
    std::unique_ptr<Engine> engines[2];
    for (bool overlap : {false, true}) {
      cuda::Tuning t;
      t.overlap_kernel_launches = overlap;
      auto e = cuda::CreateCudaEngine(model, CudaEngineOptions{}, t);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      engines[overlap] = std::move(e).value();
    }
    for (const std::vector<int>& lengths :
         {std::vector<int>{128}, {1, 7, 64, 300}, std::vector<int>(40, 100)}) {
      const RaggedBatch batch = MakeBatch(lengths, 72);
      const std::string what =
          std::string(spec.name) + ", " + std::to_string(lengths.size()) + " sequences";
      for (int run = 0; run < 2; ++run) {  // eager, then replayed
        auto plain = engines[0]->Run(batch, {.last_hidden_state = true});
        auto overlapped = engines[1]->Run(batch, {.last_hidden_state = true});
        ASSERT_TRUE(plain.ok() && overlapped.ok());
        ExpectIdentical(*overlapped, *plain, what + ", run " + std::to_string(run));
        for (auto& e : engines) e->WaitForBackgroundWork();
      }
    }
  }
}

// Past 2048 tokens the buckets step by up to 1/16 of the size: 41 sequences
// of 500 tokens (20,500) pad to 21,504 tokens, more than the 7 dummies the
// sequence count leaves can hold at 64 tokens each, so the batch gets 64
// sequences. Eager, captured and replayed runs agree, and with the CPU.
TEST(CudaEngineTest, LargeBucketsSpreadThePaddingOverEnoughDummies) {
  SKIP_WITHOUT_GPU();
  CpuAndCuda e;
  ASSERT_NO_FATAL_FAILURE(MakeCpuAndCuda(51, Precision::kFp16, &e));
  const RaggedBatch batch = MakeBatch(std::vector<int>(41, 500), 52);
  std::vector<BatchOutputs> runs;
  for (int i = 0; i < 3; ++i) {
    auto out = e.gpu->Run(batch, {});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    runs.push_back(std::move(out).value());
    e.gpu->WaitForBackgroundWork();
  }
  ExpectIdentical(runs[1], runs[0], "replayed vs eager");
  ExpectIdentical(runs[2], runs[0], "replayed again vs eager");
  auto want = e.cpu->Run(batch, {});
  ASSERT_TRUE(want.ok());
  ExpectClose(runs[2], *want, Precision::kFp16, "replayed vs cpu");
}

// From 8,192 rows a LayerNorm's warps take two rows each. 9,007 tokens in 21
// sequences, every row compared (a QA head reads them all), at a width on the
// warp path (256): bucketed (9,216 rows) and as they are (an engine without
// CUDA graphs runs exact shapes, so the last warp has one row of its two).
TEST(CudaEngineTest, LayerNormsOverManyRowsMatchTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  auto model = MakeModel(kSpecs[2], 61);
  ASSERT_EQ(model->config.hidden_size, 256);
  auto cpu = CreateCpuEngine(model, {});
  ASSERT_TRUE(cpu.ok());
  std::vector<int> lengths(20, 450);
  lengths.push_back(7);
  const RaggedBatch batch = MakeBatch(lengths, 62);
  ASSERT_EQ(batch.num_tokens(), 9007);
  const RunOptions opts{.last_hidden_state = true};
  auto want = (*cpu)->Run(batch, opts);
  ASSERT_TRUE(want.ok());
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    for (bool exact : {false, true}) {
      CudaEngineOptions o;
      o.precision = p;
      cuda::Tuning t;
      t.cuda_graphs = !exact;
      auto gpu = cuda::CreateCudaEngine(model, o, t);
      ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
      auto got = (*gpu)->Run(batch, opts);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectClose(*got, *want, p,
                  std::string(PrecisionName(p)) + (exact ? ", exact" : ", bucketed"));
    }
  }
}

// Graphs are captured on the engine's own thread while batches keep coming:
// a capture that began before the activation pool grew points into the old
// pool and must be discarded, and runs interleaved with captures (eager and
// replayed, many shapes) must all still match the CPU engine.
TEST(CudaEngineTest, BackgroundCapturesSurviveAPoolThatGrowsUnderThem) {
  SKIP_WITHOUT_GPU();
  CpuAndCuda e;
  ASSERT_NO_FATAL_FAILURE(MakeCpuAndCuda(61, Precision::kFp16, &e));
  // Growing batches: each new size moves the pool while the previous
  // shapes' captures may still be running.
  std::vector<RaggedBatch> batches;
  for (int i = 0; i < 12; ++i)
    batches.push_back(MakeBatch(std::vector<int>(1 + 3 * i, 20 + 19 * i), 62 + i));
  for (int pass = 0; pass < 4; ++pass) {
    // The last pass comes after every capture has finished: all replays.
    if (pass == 3) e.gpu->WaitForBackgroundWork();
    for (const RaggedBatch& b : batches) {
      auto got = e.gpu->Run(b, {});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto want = e.cpu->Run(b, {});
      ASSERT_TRUE(want.ok());
      ExpectClose(*got, *want, Precision::kFp16,
                  "pass " + std::to_string(pass) + ", " + std::to_string(b.num_seqs()) + " seqs");
    }
  }
  EXPECT_EQ(e.gpu->device().find("graphs off"), std::string::npos) << e.gpu->device();
}

// The plan builder times the GEMMs the forward runs, widths from the weight
// schema: a gated FFN's first GEMM gives both halves (2 x intermediate wide;
// ModernBERT's), and that is the shape timed. In bf16: the timed choices
// join a process-wide cache that TimeGemms answers from by precision, and
// the fp16 test below counts its own.
TEST(CudaEngineTest, GemmTimingTakesTheSchemasWidths) {
  SKIP_WITHOUT_GPU();
  ModelConfig c = MakeModel(kSpecs[0], 71)->config;
  c.gated_ffn = true;
  CudaEngineOptions bf16;
  bf16.precision = Precision::kBf16;
  auto choices = TimeGemms(c, bf16, 64, nullptr);
  ASSERT_TRUE(choices.ok()) << choices.status().ToString();
  // A choice's key: prefix, then "out,rows,in|epilogue".
  const std::string gated_ffn_in = "|" + std::to_string(2 * c.intermediate_size) + ",64," +
                                   std::to_string(c.hidden_size) + "|";
  const std::string plain_ffn_in = "|" + std::to_string(c.intermediate_size) + ",64," +
                                   std::to_string(c.hidden_size) + "|";
  int gated = 0;
  for (const GemmChoice& choice : *choices) {
    gated += choice.gemm.find(gated_ffn_in) != std::string::npos;
    EXPECT_EQ(choice.gemm.find(plain_ffn_in), std::string::npos) << choice.gemm;
  }
  EXPECT_EQ(gated, 1);
}

// `bertrt build --device cuda` times the GEMMs of every batch size
// (TimeGemms) and the plan carries the choices: an engine on the same GPU
// uses them as they are; one whose plan holds only other GPUs' choices times
// its own at first use and says so (one built without a GPU keeps the
// heuristic, and says that); a choice under this GPU's name that
// cuBLASLt rejects (garbage bytes, as a hostile plan could hold) falls back
// to the heuristic. All match the CPU engine.
TEST(CudaEngineTest, PlanGemmChoicesServeWhereTheyWereTimed) {
  SKIP_WITHOUT_GPU();
  const Spec s{"seqcls", 128, 4, 256, HiddenAct::kGelu, HeadKind::kSequenceClassification};
  auto base = MakeModel(s, 71);
  int calls = 0, total = 0;
  auto choices = TimeGemms(base->config, CudaEngineOptions{}, 512, [&](int done, int n) {
    EXPECT_EQ(done, ++calls);
    total = n;
  });
  ASSERT_TRUE(choices.ok()) << choices.status().ToString();
  EXPECT_EQ(calls, 8);  // 64, 128, ..., 512 tokens
  EXPECT_EQ(total, 8);
  ASSERT_FALSE(choices->empty());
  EXPECT_LE(choices->size(), 4u * 8);
  auto gpus = ListGpus();
  ASSERT_TRUE(gpus.ok());
  const std::string prefix = (*gpus)[0].name + "|cublasLt ";
  for (const GemmChoice& c : *choices) {
    EXPECT_EQ(c.gemm.rfind(prefix, 0), 0u) << c.gemm;
    EXPECT_EQ(c.algo.size(), 128u) << c.gemm;
  }

  auto cpu = CreateCpuEngine(base, {});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  // 270 tokens run as 320, within the timed sizes; 900 run as 960, beyond.
  const RaggedBatch small = MakeBatch({100, 37, 128, 5}, 72);
  const RaggedBatch large = MakeBatch({300, 300, 300}, 73);
  std::vector<std::string> notices;
  auto run_plan = [&](std::vector<GemmChoice> plan_choices, const std::string& what,
                      bool expect_timing) {
    auto m = std::make_shared<Model>(*base);
    m->gemm_choices = std::move(plan_choices);
    CudaEngineOptions o;
    o.on_notice = [&](const std::string& n) { notices.push_back(n); };
    auto gpu = CreateCudaEngine(m, o);
    ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status().ToString();
    EXPECT_EQ((*gpu)->device().find("GEMMs timed at first use") != std::string::npos, expect_timing)
        << what << ": " << (*gpu)->device();
    for (const RaggedBatch* b : {&small, &large}) {
      auto got = (*gpu)->Run(*b, {});
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      auto want = (*cpu)->Run(*b, {});
      ASSERT_TRUE(want.ok());
      ExpectClose(*got, *want, Precision::kFp16, what);
    }
  };

  run_plan(*choices, "plan timed on this GPU", false);
  EXPECT_TRUE(notices.empty()) << notices.front();

  // The four encoder GEMMs of the 960-token batch, named as the engine
  // names them ("out,rows,in|epilogue"), with bytes no algorithm has (before
  // an engine that times its own GEMMs puts real choices under these names).
  std::vector<GemmChoice> garbage = *choices;
  // "<gpu>|cublasLt <version>|fp16|": what comes before the shape.
  const std::string& first = (*choices)[0].gemm;
  size_t cut = first.find('|');
  cut = first.find('|', cut + 1);
  cut = first.find('|', cut + 1);
  const std::string here = first.substr(0, cut + 1);
  for (const char* shape : {"384,960,128|0", "128,960,128|0", "256,960,128|1", "128,960,256|0"})
    garbage.push_back({here + shape, std::string(128, 'f')});
  run_plan(garbage, "plan with garbage choices", false);

  std::vector<GemmChoice> elsewhere = *choices;
  for (GemmChoice& c : elsewhere) c.gemm = "Another GPU" + c.gemm.substr(c.gemm.find('|'));
  run_plan(elsewhere, "plan timed on another GPU", true);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("re-timing each GEMM"), std::string::npos) << notices[0];
  run_plan({}, "plan built without a GPU", false);
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_NE(notices[1].find("holds no GEMM choices"), std::string::npos) << notices[1];
}

// Two engines of one model on one GPU pick the same GEMM algorithms (timed
// ones too, through the shared cache), so they compute the same bits; a
// profiling engine times every operation.
TEST(CudaEngineTest, TwoEnginesAgreeAndProfileTimesEveryOperation) {
  SKIP_WITHOUT_GPU();
  auto model = MakeModel(kTokCls, 41);
  const RaggedBatch batch = MakeBatch({17, 64, 3, 120}, 42);
  auto first = MakeCuda(model, Precision::kFp16);
  auto second = MakeCuda(model, Precision::kFp16);
  ASSERT_TRUE(first.ok() && second.ok());
  for (int i = 0; i < 3; ++i) {
    auto a = (*first)->Run(batch, {});
    auto b = (*second)->Run(batch, {});
    ASSERT_TRUE(a.ok() && b.ok());
    ExpectIdentical(*b, *a, "second engine vs first, run " + std::to_string(i));
  }

  CudaEngineOptions o;
  o.profile = true;
  // The erf GELU is part of "gemm ffn_in": fused into the GEMM, or the
  // activation kernel right after cuBLASLt's (LinearLayers::Run).
  o.approximate_erf_gelu = false;
  auto profiled = CreateCudaEngine(model, o);
  ASSERT_TRUE(profiled.ok()) << profiled.status().ToString();
  auto cpu = CreateCpuEngine(model, {});
  ASSERT_TRUE(cpu.ok());
  auto want = (*cpu)->Run(batch, {});
  ASSERT_TRUE(want.ok());
  // The first run is eager; once its graph is captured, the second replays
  // it, stamps and all.
  for (int i = 0; i < 2; ++i) {
    auto out = (*profiled)->Run(batch, {});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectClose(*out, *want, Precision::kFp16, "profiled vs cpu, run " + std::to_string(i));
    (*profiled)->WaitForBackgroundWork();
  }
  std::map<std::string, OpProfile> ops;
  for (const OpProfile& op : (*profiled)->Profile()) ops[op.name] = op;
  const long layers = model->config.num_layers;
  const std::map<std::string, long> calls_per_forward = {
      {"embedding+layernorm", 1}, {"gemm qkv", layers},      {"attention", layers},
      {"gemm attn_out", layers},  {"layernorm", 2 * layers}, {"gemm ffn_in", layers},
      {"gemm ffn_out", layers},   {"head", 1}};
  EXPECT_EQ(ops.size(), calls_per_forward.size());
  for (const auto& [name, calls] : calls_per_forward) {
    ASSERT_TRUE(ops.count(name)) << name;
    EXPECT_EQ(ops[name].calls, 2 * calls) << name;
    // Stamps that were never written would read as stale or garbage times.
    EXPECT_LT(std::abs(ops[name].seconds), 0.1) << name;
  }
  for (const char* name : {"gemm qkv", "attention", "gemm ffn_out"})
    EXPECT_GT(ops[name].seconds, 0) << name;
  // The forward runs the batch's bucketed shape, dummy rows and all.
  const double tokens =
      cuda::PaddedShape(batch.num_tokens(), batch.num_seqs(), batch.max_len, false).tokens;
  const double h = model->config.hidden_size;
  EXPECT_DOUBLE_EQ(ops["gemm qkv"].flops, 2 * layers * 2.0 * tokens * h * 3 * h);
  EXPECT_TRUE((*first)->Profile().empty());
}

// 1,000 runs over 500 random batches (many bucketed shapes, so graphs are
// captured, and evicted when they outnumber the cache) must leave the device memory and
// the engine's pool where they were after the first pass over the shapes.
TEST(CudaEngineTest, NoMemoryGrowthOver1000Runs) {
  SKIP_WITHOUT_GPU();
  const Spec s{"seqcls", 128, 4, 256, HiddenAct::kGelu, HeadKind::kSequenceClassification};
  auto gpu = MakeCuda(MakeModel(s, 5), Precision::kFp16);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  std::vector<RaggedBatch> batches;
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::vector<int> lengths(1 + rng() % 31);
    for (int& len : lengths) len = 1 + rng() % 256;
    batches.push_back(MakeBatch(lengths, 100 + i));
  }
  // The largest batch first, so the pool reaches its final size at once.
  std::sort(batches.begin(), batches.end(), [](const RaggedBatch& a, const RaggedBatch& b) {
    return a.num_tokens() > b.num_tokens();
  });
  auto run = [&](int i) {
    auto out = (*gpu)->Run(batches[i % batches.size()], {});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
  };
  for (int i = 0; i < 2 * static_cast<int>(batches.size()); ++i) run(i);
  (*gpu)->WaitForBackgroundWork();
  auto used_before = GpuMemoryInUse(0);
  ASSERT_TRUE(used_before.ok()) << used_before.status().ToString();
  const size_t peak_before = (*gpu)->PeakMemoryBytes();
  for (int i = 0; i < 1000; ++i) run(i);
  (*gpu)->WaitForBackgroundWork();
  auto used_after = GpuMemoryInUse(0);
  ASSERT_TRUE(used_after.ok()) << used_after.status().ToString();
  EXPECT_EQ((*gpu)->PeakMemoryBytes(), peak_before);
  // 2 MiB: the driver's allocation granularity, not growth per run.
  EXPECT_LE(*used_after, *used_before + (2u << 20))
      << "device memory in use grew from " << *used_before << " to " << *used_after << " bytes";
}

TEST(CudaEngineTest, RejectsInvalidIdsBeforeAnyKernel) {
  SKIP_WITHOUT_GPU();
  const Spec s{"seqcls", 64, 4, 100, HiddenAct::kGelu, HeadKind::kSequenceClassification};
  auto gpu = MakeCuda(MakeModel(s, 3), Precision::kFp16);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  RaggedBatch bad = MakeBatch({5, 9}, 4);
  bad.input_ids[7] = kVocab;
  EXPECT_EQ((*gpu)->Run(bad, {}).status().code(), StatusCode::kInvalidArgument);
  RaggedBatch bad_type = MakeBatch({5}, 4);
  bad_type.token_type_ids[2] = 2;
  EXPECT_EQ((*gpu)->Run(bad_type, {}).status().code(), StatusCode::kInvalidArgument);
  RaggedBatch too_long = MakeBatch({513}, 4);
  EXPECT_EQ((*gpu)->Run(too_long, {}).status().code(), StatusCode::kInvalidArgument);
  // The refusals ran nothing on the GPU, so the engine is still healthy.
  auto ok = (*gpu)->Run(MakeBatch({5, 9}, 4), {});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->Find("logits")->data.size(), 2u * kLabels);
}

TEST(CudaEngineTest, PoolGrowsAndMaxBatchTokensIsEnforced) {
  SKIP_WITHOUT_GPU();
  const Spec s{"base", 128, 4, 200, HiddenAct::kGelu, HeadKind::kBase};
  auto model = MakeModel(s, 5);
  auto grow = MakeCuda(model, Precision::kFp16);
  ASSERT_TRUE(grow.ok()) << grow.status().ToString();
  ASSERT_TRUE((*grow)->Run(MakeBatch({10}, 1), {}).ok());
  const size_t small = (*grow)->PeakMemoryBytes();
  ASSERT_TRUE((*grow)->Run(MakeBatch({512, 512, 512}, 1), {}).ok());
  EXPECT_GT((*grow)->PeakMemoryBytes(), small);

  auto capped = MakeCuda(model, Precision::kFp16, 600);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_TRUE((*capped)->Run(MakeBatch({300, 300}, 1), {}).ok());
  EXPECT_EQ((*capped)->Run(MakeBatch({300, 301}, 1), {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE((*capped)->device().find("cuda:0"), std::string::npos);

  // A batch filling the reservation cannot be padded: it runs at its exact
  // shape, which is captured like any other, and the pool does not grow.
  auto full = MakeCuda(model, Precision::kFp16, 768);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const size_t reserved = (*full)->PeakMemoryBytes();
  auto first = (*full)->Run(MakeBatch({384, 384}, 2), {});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  for (int i = 0; i < 2; ++i) {
    auto again = (*full)->Run(MakeBatch({384, 384}, 2), {});
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->Find("pooler_output")->data, first->Find("pooler_output")->data);
  }
  EXPECT_EQ((*full)->PeakMemoryBytes(), reserved);
}

}  // namespace
}  // namespace bertrt
#endif  // BERTRT_HAVE_CUDA

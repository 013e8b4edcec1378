// The CPU engine end to end on small random models, against a naive float64
// forward written here from the HF definitions: every head, every activation,
// odd sizes, ragged batches, and the errors it must return.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bertrt/engine.h"

namespace bertrt {
namespace {

struct Spec {
  int h = 48, heads = 3, layers = 2, inter = 37, labels = 3;
  HiddenAct act = HiddenAct::kGelu;
  HeadKind head = HeadKind::kBase;
  bool pooler = true;
  std::vector<Pooling> pooling = {Pooling::kMean};
  bool normalize = false;
  std::vector<DenseSpec> dense;  // in_features is filled in from the width before
  int truncate_dim = 0;
};

constexpr int kVocab = 50, kMaxPos = 70, kTypes = 2;

Tensor Rand(std::vector<int64_t> shape, std::mt19937* rng, float scale, float offset = 0.0f) {
  Tensor t = Tensor::ZerosF32(std::move(shape));
  std::uniform_real_distribution<float> d(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_f32()[i] = offset + d(*rng);
  return t;
}

std::shared_ptr<Model> MakeModel(const Spec& s, uint32_t seed = 11) {
  std::mt19937 rng(seed);
  auto m = std::make_shared<Model>();
  ModelConfig& c = m->config;
  c.vocab_size = kVocab;
  c.hidden_size = s.h;
  c.num_layers = s.layers;
  c.num_heads = s.heads;
  c.intermediate_size = s.inter;
  c.max_position_embeddings = kMaxPos;
  c.type_vocab_size = kTypes;
  c.layer_norm_eps = 1e-12f;
  c.hidden_act = s.act;
  c.head = s.head;
  c.num_labels = s.head == HeadKind::kQuestionAnswering ? 2 : s.labels;
  c.pooling_modes = s.pooling;
  c.normalize = s.normalize;
  c.truncate_dim = s.truncate_dim;
  c.max_seq_length = kMaxPos;
  int width = c.pooled_width();
  for (DenseSpec d : s.dense) {
    d.in_features = width;
    c.dense.push_back(d);
    width = d.out_features;
  }
  ModelWeights& w = m->weights;
  const int64_t h = s.h;
  const float lin = 1.5f / std::sqrt(static_cast<float>(s.h));
  w.word_embeddings = Rand({kVocab, h}, &rng, 1.0f);
  w.position_embeddings = Rand({kMaxPos, h}, &rng, 0.5f);
  w.token_type_embeddings = Rand({kTypes, h}, &rng, 0.5f);
  w.emb_ln_gamma = Rand({h}, &rng, 0.5f, 1.0f);
  w.emb_ln_beta = Rand({h}, &rng, 0.2f);
  for (int l = 0; l < s.layers; ++l) {
    LayerWeights L;
    for (Tensor* t : {&L.query_w, &L.key_w, &L.value_w, &L.attn_out_w}) *t = Rand({h, h}, &rng, lin);
    for (Tensor* t : {&L.query_b, &L.key_b, &L.value_b, &L.attn_out_b, &L.ffn_out_b})
      *t = Rand({h}, &rng, 0.2f);
    L.ffn_in_w = Rand({s.inter, h}, &rng, lin);
    L.ffn_in_b = Rand({s.inter}, &rng, 0.2f);
    L.ffn_out_w = Rand({h, s.inter}, &rng, 1.5f / std::sqrt(static_cast<float>(s.inter)));
    for (Tensor* t : {&L.attn_ln_gamma, &L.ffn_ln_gamma}) *t = Rand({h}, &rng, 0.5f, 1.0f);
    for (Tensor* t : {&L.attn_ln_beta, &L.ffn_ln_beta}) *t = Rand({h}, &rng, 0.2f);
    w.layers.push_back(std::move(L));
  }
  if (s.pooler) {
    w.pooler_w = Rand({h, h}, &rng, lin);
    w.pooler_b = Rand({h}, &rng, 0.2f);
  }
  if (s.head != HeadKind::kBase && s.head != HeadKind::kSentenceEmbedding) {
    w.classifier_w = Rand({c.num_labels, h}, &rng, lin);
    w.classifier_b = Rand({c.num_labels}, &rng, 0.2f);
  }
  for (const DenseSpec& d : c.dense) {
    DenseWeights& dw = w.dense.emplace_back();
    dw.w = Rand({d.out_features, d.in_features}, &rng, 2.0f / std::sqrt(float(d.in_features)));
    if (d.bias) dw.b = Rand({d.out_features}, &rng, 0.2f);
  }
  return m;
}

using Mat = std::vector<double>;  // row-major

Mat Dense(const Mat& x, int rows, const Tensor& w, const Tensor& b) {
  const int out = static_cast<int>(w.dim(0)), in = static_cast<int>(w.dim(1));
  Mat y(static_cast<size_t>(rows) * out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b.f32()[o];
      for (int i = 0; i < in; ++i) s += x[r * in + i] * w.f32()[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

void LayerNorm(Mat* x, int rows, int h, const Tensor& g, const Tensor& b, double eps) {
  for (int r = 0; r < rows; ++r) {
    double* row = x->data() + static_cast<size_t>(r) * h;
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < h; ++i) mean += row[i];
    mean /= h;
    for (int i = 0; i < h; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= h;
    for (int i = 0; i < h; ++i) row[i] = (row[i] - mean) / std::sqrt(var + eps) * g.f32()[i] + b.f32()[i];
  }
}

double Activate(double x, HiddenAct act) {
  switch (act) {
    case HiddenAct::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case HiddenAct::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case HiddenAct::kRelu: return std::max(x, 0.0);
  }
  return x;
}

// One sequence through the encoder: last hidden state [len, h].
Mat RefEncode(const Model& m, const std::vector<int32_t>& ids, const std::vector<int32_t>& types) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int n = static_cast<int>(ids.size()), h = c.hidden_size, d = c.head_dim();
  Mat x(static_cast<size_t>(n) * h);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < h; ++i)
      x[t * h + i] = double{w.word_embeddings.f32()[ids[t] * h + i]} +
                     w.position_embeddings.f32()[t * h + i] +
                     w.token_type_embeddings.f32()[types[t] * h + i];
  LayerNorm(&x, n, h, w.emb_ln_gamma, w.emb_ln_beta, c.layer_norm_eps);
  for (const LayerWeights& L : w.layers) {
    Mat q = Dense(x, n, L.query_w, L.query_b), k = Dense(x, n, L.key_w, L.key_b),
        v = Dense(x, n, L.value_w, L.value_b), ctx(x.size(), 0.0);
    for (int hd = 0; hd < c.num_heads; ++hd)
      for (int i = 0; i < n; ++i) {
        std::vector<double> p(n);
        for (int j = 0; j < n; ++j) {
          for (int e = 0; e < d; ++e) p[j] += q[i * h + hd * d + e] * k[j * h + hd * d + e];
          p[j] /= std::sqrt(static_cast<double>(d));
        }
        double mx = *std::max_element(p.begin(), p.end()), sum = 0.0;
        for (double& e : p) sum += (e = std::exp(e - mx));
        for (int j = 0; j < n; ++j)
          for (int e = 0; e < d; ++e) ctx[i * h + hd * d + e] += p[j] / sum * v[j * h + hd * d + e];
      }
    Mat a = Dense(ctx, n, L.attn_out_w, L.attn_out_b);
    for (size_t i = 0; i < a.size(); ++i) a[i] += x[i];
    LayerNorm(&a, n, h, L.attn_ln_gamma, L.attn_ln_beta, c.layer_norm_eps);
    Mat f = Dense(a, n, L.ffn_in_w, L.ffn_in_b);
    for (double& e : f) e = Activate(e, c.hidden_act);
    x = Dense(f, n, L.ffn_out_w, L.ffn_out_b);
    for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    LayerNorm(&x, n, h, L.ffn_ln_gamma, L.ffn_ln_beta, c.layer_norm_eps);
  }
  return x;
}

// The expected outputs of one sequence, by name.
std::vector<std::pair<std::string, Mat>> RefOutputs(const Model& m, const std::vector<int32_t>& ids,
                                                    const std::vector<int32_t>& types) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int n = static_cast<int>(ids.size()), h = c.hidden_size;
  Mat x = RefEncode(m, ids, types);
  Mat pooled;
  if (!w.pooler_w.empty()) {
    pooled = Dense(Mat(x.begin(), x.begin() + h), 1, w.pooler_w, w.pooler_b);
    for (double& e : pooled) e = std::tanh(e);
  }
  std::vector<std::pair<std::string, Mat>> out;
  switch (c.head) {
    case HeadKind::kBase:
      if (!pooled.empty()) out.push_back({"pooler_output", pooled});
      break;
    case HeadKind::kSequenceClassification:
      out.push_back({"logits", Dense(pooled, 1, w.classifier_w, w.classifier_b)});
      break;
    case HeadKind::kTokenClassification:
      out.push_back({"logits", Dense(x, n, w.classifier_w, w.classifier_b)});
      break;
    case HeadKind::kQuestionAnswering: {
      Mat l = Dense(x, n, w.classifier_w, w.classifier_b), s(n), e(n);
      for (int t = 0; t < n; ++t) s[t] = l[2 * t], e[t] = l[2 * t + 1];
      out.push_back({"start_logits", s});
      out.push_back({"end_logits", e});
      break;
    }
    case HeadKind::kSentenceEmbedding: {
      // sentence-transformers' definitions, in float64.
      Mat emb;
      for (Pooling p : c.pooling_modes) {
        Mat v(h, p == Pooling::kMax ? -1e300 : 0.0);
        double weights = 0.0;
        for (int t = 0; t < n; ++t) {
          const double wt = p == Pooling::kWeightedMean ? t + 1.0 : 1.0;
          weights += wt;
          for (int i = 0; i < h; ++i)
            v[i] = p == Pooling::kMax ? std::max(v[i], x[t * h + i]) : v[i] + wt * x[t * h + i];
        }
        for (int i = 0; i < h; ++i) {
          if (p == Pooling::kCls) v[i] = x[i];
          if (p == Pooling::kLastToken) v[i] = x[(n - 1) * h + i];
          if (p == Pooling::kMean || p == Pooling::kWeightedMean) v[i] /= weights;
          if (p == Pooling::kMeanSqrtLen) v[i] /= std::sqrt(double(n));
        }
        emb.insert(emb.end(), v.begin(), v.end());
      }
      for (size_t k = 0; k < c.dense.size(); ++k) {
        emb = Dense(emb, 1, w.dense[k].w, w.dense[k].b);
        for (double& e : emb) {
          switch (c.dense[k].activation) {
            case DenseActivation::kIdentity: break;
            case DenseActivation::kTanh: e = std::tanh(e); break;
            case DenseActivation::kRelu: e = std::max(e, 0.0); break;
            case DenseActivation::kGelu: e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0))); break;
            case DenseActivation::kSigmoid: e = 1.0 / (1.0 + std::exp(-e)); break;
          }
        }
      }
      double norm = 0.0;
      for (double e : emb) norm += e * e;
      if (c.normalize)
        for (double& e : emb) e /= std::max(std::sqrt(norm), 1e-12);
      if (c.truncate_dim > 0) emb.resize(c.truncate_dim);
      out.push_back({"embedding", emb});
      break;
    }
  }
  out.push_back({"last_hidden_state", x});
  return out;
}

struct Seq {
  std::vector<int32_t> ids, types;
};

std::vector<Seq> RandomSeqs(const std::vector<int>& lens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, kVocab - 1), type(0, kTypes - 1);
  std::vector<Seq> seqs;
  for (int len : lens) {
    Seq s;
    for (int t = 0; t < len; ++t) s.ids.push_back(id(rng)), s.types.push_back(type(rng));
    seqs.push_back(s);
  }
  return seqs;
}

// The rows of output `o` that belong to sequence i.
std::vector<float> Rows(const NamedOutput& o, const RaggedBatch& b, int i) {
  const size_t begin = o.per_token ? b.cu_seqlens[i] : i, end = o.per_token ? b.cu_seqlens[i + 1] : i + 1;
  return std::vector<float>(o.data.begin() + begin * o.width, o.data.begin() + end * o.width);
}

double NormRelErr(const std::vector<float>& got, const Mat& want) {
  double err = 0.0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return got.size() == want.size() ? err / scale : 1e30;
}

// Runs lens {1, 2, 7, 64} as one batch and one at a time: both must match
// the float64 reference, and each other to fp32 noise. The batch runs again
// without hidden states, where a head that reads only first tokens has the
// last layer run on those rows alone: the same outputs.
void CheckModel(const Spec& spec, int threads = 2) {
  auto model = MakeModel(spec);
  auto engine = CreateCpuEngine(model, {threads});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::vector<Seq> seqs = RandomSeqs({1, 2, 7, 64}, 5);
  RaggedBatch batch;
  for (const Seq& s : seqs) batch.Add(s.ids, s.types);
  auto got = (*engine)->Run(batch, {.last_hidden_state = true});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto heads = (*engine)->Run(batch, {});
  ASSERT_TRUE(heads.ok()) << heads.status().ToString();
  for (size_t i = 0; i < seqs.size(); ++i) {
    RaggedBatch one;
    one.Add(seqs[i].ids, seqs[i].types);
    auto alone = (*engine)->Run(one, {.last_hidden_state = true});
    ASSERT_TRUE(alone.ok());
    auto want = RefOutputs(*model, seqs[i].ids, seqs[i].types);
    ASSERT_EQ(got->outputs.size(), want.size());
    for (const auto& [name, ref] : want) {
      const NamedOutput* o = got->Find(name);
      ASSERT_NE(o, nullptr) << name;
      EXPECT_LE(NormRelErr(Rows(*o, batch, i), ref), 1e-4) << name << " seq " << i;
      if (name != "last_hidden_state") {
        const NamedOutput* h = heads->Find(name);
        ASSERT_NE(h, nullptr) << name;
        EXPECT_LE(NormRelErr(Rows(*h, batch, i), ref), 1e-4)
            << name << " seq " << i << ", heads only";
      }
      // oneDNN's sgemm picks its kernel by the row count, so a row batched
      // with others may round differently from the same row alone: equal to
      // fp32 noise (~1e-6 of the output scale), not bit for bit.
      const std::vector<float>& a = alone->Find(name)->data;
      EXPECT_LE(NormRelErr(Rows(*o, batch, i), Mat(a.begin(), a.end())), 2e-6)
          << name << " seq " << i;
    }
  }
}

TEST(CpuEngine, BaseWithPoolerGelu) { CheckModel({}); }
TEST(CpuEngine, BaseWithoutPoolerOneThread) { CheckModel({.pooler = false}, 1); }
TEST(CpuEngine, SequenceClassificationGeluTanh) {
  CheckModel({.h = 32, .heads = 4, .inter = 64, .act = HiddenAct::kGeluTanh,
              .head = HeadKind::kSequenceClassification});
}
TEST(CpuEngine, TokenClassificationRelu) {
  CheckModel({.labels = 5, .act = HiddenAct::kRelu, .head = HeadKind::kTokenClassification});
}
TEST(CpuEngine, QuestionAnswering) {
  CheckModel({.h = 100, .heads = 4, .layers = 1, .inter = 100, .head = HeadKind::kQuestionAnswering,
              .pooler = false});
}
TEST(CpuEngine, SentenceEmbeddingEveryPooling) {
  for (Pooling p : {Pooling::kCls, Pooling::kMean, Pooling::kMax, Pooling::kMeanSqrtLen,
                    Pooling::kWeightedMean, Pooling::kLastToken})
    for (bool normalize : {false, true})
      CheckModel({.head = HeadKind::kSentenceEmbedding, .pooler = false, .pooling = {p},
                  .normalize = normalize});
}
// Concatenated modes in sentence-transformers' order, two Dense modules (one
// without a bias), the normalization and truncate_dim after it.
TEST(CpuEngine, SentenceEmbeddingConcatenatedDenseTruncated) {
  CheckModel({.head = HeadKind::kSentenceEmbedding,
              .pooler = false,
              .pooling = {Pooling::kCls, Pooling::kMax, Pooling::kMean},
              .normalize = true,
              .dense = {{.out_features = 40, .bias = true, .activation = DenseActivation::kTanh},
                        {.out_features = 24, .bias = false, .activation = DenseActivation::kGelu}},
              .truncate_dim = 16});
  for (DenseActivation a : {DenseActivation::kIdentity, DenseActivation::kRelu,
                            DenseActivation::kSigmoid})
    CheckModel({.head = HeadKind::kSentenceEmbedding,
                .pooler = false,
                .pooling = {Pooling::kLastToken, Pooling::kWeightedMean},
                .dense = {{.out_features = 30, .activation = a}}});
}

TEST(CpuEngine, LastHiddenStateOnlyWhenAsked) {
  auto engine = CreateCpuEngine(MakeModel({}), {0});
  ASSERT_TRUE(engine.ok());
  RaggedBatch b;
  b.Add({1, 2, 3}, {0, 0, 1});
  auto out = (*engine)->Run(b, {});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->outputs.size(), 1u);
  EXPECT_EQ(out->outputs[0].name, "pooler_output");
  EXPECT_GT((*engine)->PeakMemoryBytes(), 0u);
}

TEST(CpuEngine, RejectsInvalidBatches) {
  auto engine = CreateCpuEngine(MakeModel({}), {2});
  ASSERT_TRUE(engine.ok());
  RaggedBatch bad_id, bad_type, too_long;
  bad_id.Add({1, kVocab}, {0, 0});
  bad_type.Add({1, 2}, {0, kTypes});
  too_long.Add(std::vector<int32_t>(kMaxPos + 1, 1), std::vector<int32_t>(kMaxPos + 1, 0));
  for (const RaggedBatch* b : {&bad_id, &bad_type, &too_long}) {
    auto out = (*engine)->Run(*b, {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  }
}

// Int8 GEMMs calibrated on random batches: the report compares with fp32
// on the held-out ones, the outputs stay close to fp32's; a budget no int8
// GEMM meets puts Linears back to fp32 until it holds, and says which.
TEST(CpuEngine, Int8CalibratesReportsAndFallsBackToMeetItsBudget) {
  const Spec spec{.head = HeadKind::kSentenceEmbedding, .pooling = {Pooling::kMean}};
  auto model = MakeModel(spec);
  auto batch_of = [](const std::vector<int>& lens, uint32_t seed) {
    RaggedBatch b;
    for (const Seq& s : RandomSeqs(lens, seed)) b.Add(s.ids, s.types);
    return b;
  };
  QuantizeOptions int8;
  int8.calibration = {batch_of({5, 17, 30, 64}, 1), batch_of({3, 40}, 2)};
  int8.held_out = {batch_of({7, 12, 25, 50, 2, 9}, 3)};
  int8.budget.cosine_mean = 0.99;  // a tiny random model's; the real default is 0.999
  int8.budget.cosine_min = 0.98;
  int8.budget.top10_overlap = 0.0;
  CpuEngineOptions options{2};
  options.quantize = int8;
  auto fp32 = CreateCpuEngine(model, {2});
  auto q8 = CreateCpuEngine(model, options);
  ASSERT_TRUE(fp32.ok() && q8.ok()) << q8.status().ToString();
  auto report = (*q8)->Quantization();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->linears, 4 * spec.layers);
  EXPECT_EQ(report->calibration_sequences, 6);
  EXPECT_EQ(report->held_out_sequences, 6);
  ASSERT_EQ(report->outputs.size(), 1u);
  EXPECT_EQ(report->outputs[0].output, "embedding");
  EXPECT_TRUE(report->within_budget) << report->Summary();
  EXPECT_FALSE((*fp32)->Quantization().has_value());
  const RaggedBatch test = batch_of({4, 33, 60}, 4);
  auto a = (*fp32)->Run(test, {}), b = (*q8)->Run(test, {});
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<float>& x = a->outputs[0].data;
  const std::vector<float>& y = b->outputs[0].data;
  EXPECT_LT(NormRelErr(y, Mat(x.begin(), x.end())), 0.1) << "int8 near fp32";
  EXPECT_GT(NormRelErr(y, Mat(x.begin(), x.end())), 1e-6) << "and not fp32 itself";

  // Out of reach for any int8 GEMM: back to fp32, one Linear at a time.
  options.quantize->budget.cosine_mean = 1.0 - 1e-9;
  auto strict = CreateCpuEngine(model, options);
  ASSERT_TRUE(strict.ok());
  report = (*strict)->Quantization();
  EXPECT_TRUE(report->within_budget) << report->Summary();
  EXPECT_FALSE(report->kept_fp32.empty());
  EXPECT_EQ(report->quantized_linears + int(report->kept_fp32.size()), report->linears);
  EXPECT_NE(report->Summary().find("kept in fp32"), std::string::npos) << report->Summary();
}

TEST(CpuEngine, RejectsInconsistentModels) {
  auto no_classifier = MakeModel({.head = HeadKind::kSequenceClassification});
  no_classifier->weights.classifier_w = Tensor();
  auto bad_heads = MakeModel({});
  bad_heads->config.num_heads = 5;
  auto bad_ffn = MakeModel({});
  bad_ffn->weights.layers[1].ffn_out_w = Tensor::ZerosF32({48, 36});
  for (auto& m : {no_classifier, bad_heads, bad_ffn})
    EXPECT_FALSE(CreateCpuEngine(m, {1}).ok());
  EXPECT_FALSE(CreateCpuEngine(nullptr, {1}).ok());
  // CheckModel, which every engine runs, names the tensor and its shapes.
  const Status bad = CreateCpuEngine(bad_ffn, {1}).status();
  EXPECT_NE(bad.message().find("layer 1 output weight is F32[48, 36], expected"),
            std::string::npos)
      << bad.ToString();
  // The config's bounds are the ones a plan's reader holds its metadata to
  // (model/config_bounds.h), named by field, whatever the model was read from.
  auto long_inputs = MakeModel({});
  long_inputs->config.max_seq_length = long_inputs->config.max_positions() + 1;
  const Status too_long = CreateCpuEngine(long_inputs, {1}).status();
  EXPECT_NE(too_long.message().find("model: max_seq_length " +
                                    std::to_string(long_inputs->config.max_positions() + 1) +
                                    " is outside [1, "),
            std::string::npos)
      << too_long.ToString();
  auto bad_eps = MakeModel({});
  bad_eps->config.layer_norm_eps = -1.0f;
  EXPECT_NE(CreateCpuEngine(bad_eps, {1}).status().message().find("layer_norm_eps"),
            std::string::npos);
}

}  // namespace
}  // namespace bertrt

#include "bertrt/importer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <vector>

#include "bertrt/head_outputs.h"
#include "bertrt/safetensors.h"
#include "core/half.h"
#include "importer_test_util.h"

namespace bertrt {
namespace {

using importer_test::Load;
using importer_test::Loaded;
using importer_test::ModelDir;

std::vector<float> Values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kF32);
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

// ---- the committed tiny models ----

struct ModelCase {
  const char* dir;
  HeadKind head;
  HiddenAct act;
  int num_labels;
  bool has_pooler;
};

class TinyModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(TinyModelTest, LoadsWithExpectedConfig) {
  const ModelCase& c = GetParam();
  Loaded l = Load(ModelDir(c.dir));
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  const Model& m = **l.model;
  EXPECT_EQ(m.config.model_type, "bert");
  EXPECT_EQ(m.config.head, c.head);
  EXPECT_EQ(m.config.hidden_act, c.act);
  EXPECT_EQ(m.config.hidden_size, 32);
  EXPECT_EQ(m.config.num_layers, 2);
  EXPECT_EQ(m.config.num_heads, 4);
  EXPECT_EQ(m.config.head_dim(), 8);
  EXPECT_EQ(m.config.intermediate_size, 37);
  EXPECT_EQ(m.config.vocab_size, 512);
  EXPECT_EQ(m.config.max_position_embeddings, 64);
  EXPECT_EQ(m.config.type_vocab_size, 2);
  EXPECT_FLOAT_EQ(m.config.layer_norm_eps, 1e-12f);
  EXPECT_EQ(m.config.num_labels, c.num_labels);
  EXPECT_EQ(m.source, ModelDir(c.dir));

  const ModelWeights& w = m.weights;
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.word_embeddings.shape(), (std::vector<int64_t>{512, 32}));
  EXPECT_EQ(w.layers[1].ffn_in_w.shape(), (std::vector<int64_t>{37, 32}));
  EXPECT_EQ(w.layers[1].ffn_out_w.shape(), (std::vector<int64_t>{32, 37}));
  EXPECT_EQ(w.pooler_w.empty(), !c.has_pooler);
  for (const Tensor* t :
       {&w.word_embeddings, &w.emb_ln_gamma, &w.layers[0].query_w, &w.layers[1].ffn_ln_beta})
    EXPECT_EQ(t->dtype(), DType::kF32);
  if (c.num_labels > 0) {
    EXPECT_EQ(w.classifier_w.shape(), (std::vector<int64_t>{c.num_labels, 32}));
    EXPECT_EQ(w.classifier_b.shape(), (std::vector<int64_t>{c.num_labels}));
  } else {
    EXPECT_TRUE(w.classifier_w.empty());
  }
  // LayerNorm gammas are random around 1, so a swapped gamma/beta would show.
  EXPECT_NEAR(Values(w.emb_ln_gamma)[0], 1.0f, 0.5f);
  EXPECT_NEAR(Values(w.emb_ln_beta)[0], 0.0f, 0.3f);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TinyModelTest,
    ::testing::Values(
        ModelCase{"base", HeadKind::kBase, HiddenAct::kGelu, 0, true},
        ModelCase{"base_prefixed", HeadKind::kBase, HiddenAct::kGeluTanh, 0, true},
        ModelCase{"seq_cls", HeadKind::kSequenceClassification, HiddenAct::kGelu, 3, true},
        ModelCase{"token_cls", HeadKind::kTokenClassification, HiddenAct::kRelu, 9, false},
        ModelCase{"qa", HeadKind::kQuestionAnswering, HiddenAct::kGeluTanh, 2, false},
        ModelCase{"sentence_mean", HeadKind::kSentenceEmbedding, HiddenAct::kGelu, 0, true},
        ModelCase{"sentence_cls", HeadKind::kSentenceEmbedding, HiddenAct::kRelu, 0, true},
        ModelCase{"sentence_max", HeadKind::kSentenceEmbedding, HiddenAct::kGeluTanh, 0, true},
        ModelCase{"seq_cls_f16", HeadKind::kSequenceClassification, HiddenAct::kGelu, 3, true},
        ModelCase{"seq_cls_bf16", HeadKind::kSequenceClassification, HiddenAct::kGelu, 3, true},
        ModelCase{"sharded", HeadKind::kSequenceClassification, HiddenAct::kGeluTanh, 2, true},
        ModelCase{"training_junk", HeadKind::kSequenceClassification, HiddenAct::kGelu, 2, true}),
    [](const auto& info) { return std::string(info.param.dir); });

TEST(Importer, Labels) {
  auto seq = Load(ModelDir("seq_cls"));
  ASSERT_TRUE(seq.model.ok());
  EXPECT_EQ((*seq.model)->config.labels,
            (std::vector<std::string>{"CLASS_0", "CLASS_1", "CLASS_2"}));
  EXPECT_EQ((*seq.model)->config.architecture, "BertForSequenceClassification");
  auto tok = Load(ModelDir("token_cls"));
  ASSERT_TRUE(tok.model.ok());
  ASSERT_EQ((*tok.model)->config.labels.size(), 9u);
  EXPECT_EQ((*tok.model)->config.labels[0], "O");
  EXPECT_EQ((*tok.model)->config.labels[1], "B-PER");
  EXPECT_EQ((*tok.model)->config.labels[8], "I-MISC");
}

TEST(Importer, SentenceTransformersSettings) {
  auto mean = Load(ModelDir("sentence_mean"));
  ASSERT_TRUE(mean.model.ok());
  EXPECT_EQ((*mean.model)->config.pooling_modes, std::vector<Pooling>{Pooling::kMean});
  EXPECT_TRUE((*mean.model)->config.normalize);
  EXPECT_EQ((*mean.model)->config.max_seq_length, 48);
  auto cls = Load(ModelDir("sentence_cls"));
  ASSERT_TRUE(cls.model.ok());
  EXPECT_EQ((*cls.model)->config.pooling_modes, std::vector<Pooling>{Pooling::kCls});
  EXPECT_FALSE((*cls.model)->config.normalize);
  EXPECT_EQ((*cls.model)->config.max_seq_length, 64);
  auto max = Load(ModelDir("sentence_max"));
  ASSERT_TRUE(max.model.ok());
  EXPECT_EQ((*max.model)->config.pooling_modes, std::vector<Pooling>{Pooling::kMax});
  EXPECT_TRUE((*max.model)->config.normalize);
}

TEST(Importer, PrefixedAndUnprefixedBaseAgreeOnLayout) {
  // Both are BertModel checkpoints, one with "bert." names; each binds fully.
  for (const char* name : {"base", "base_prefixed"}) {
    auto l = Load(ModelDir(name));
    ASSERT_TRUE(l.model.ok()) << name << ": " << l.model.status().ToString();
    EXPECT_TRUE(l.notices.empty()) << name << ": " << l.notices[0];
  }
}

// ---- families beyond BERT (scripts/make_family_models.py) ----

struct FamilyCase {
  const char* dir;
  const char* model_type;
  HeadKind head;
  int position_offset;
  DenseActivation pooler_activation;
  bool has_pooler;
};

class FamilyModelTest : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(FamilyModelTest, LoadsWithTheFamilysStructure) {
  const FamilyCase& c = GetParam();
  Loaded l = Load(ModelDir(c.dir));
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  const Model& m = **l.model;
  EXPECT_EQ(m.config.model_type, c.model_type);
  EXPECT_EQ(m.config.head, c.head);
  EXPECT_EQ(m.config.hidden_size, 32);
  EXPECT_EQ(m.config.num_layers, 2);
  EXPECT_EQ(m.config.num_heads, 4);
  EXPECT_EQ(m.config.intermediate_size, 37);
  EXPECT_EQ(m.config.position_offset, c.position_offset);
  // 64 positions for tokens, whatever the table's offset.
  EXPECT_EQ(m.config.max_positions(), 64);
  EXPECT_FALSE(m.config.takes_token_types);
  EXPECT_EQ(m.config.type_vocab_size, 1);
  EXPECT_EQ(m.weights.token_type_embeddings.shape(), (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(m.config.pooler_activation, c.pooler_activation);
  EXPECT_EQ(!m.weights.pooler_w.empty(), c.has_pooler);
  // MPNet alone has a relative position bias: 32 buckets x 4 heads.
  const bool mpnet = m.config.model_type == "mpnet";
  EXPECT_EQ(m.config.relative_attention_buckets, mpnet ? 32 : 0);
  const std::vector<int64_t> bias_shape = mpnet ? std::vector<int64_t>{32, 4}
                                                : std::vector<int64_t>{};
  EXPECT_EQ(m.weights.relative_attention_bias.shape(), bias_shape);
  // Every tensor bound: nothing left over but what transformers itself ignores.
  for (const std::string& n : l.notices) ADD_FAILURE() << c.dir << ": " << n;
}

INSTANTIATE_TEST_SUITE_P(
    Families, FamilyModelTest,
    ::testing::Values(
        FamilyCase{"roberta_seq_cls", "roberta", HeadKind::kSequenceClassification, 2,
                   DenseActivation::kTanh, true},
        FamilyCase{"roberta_base", "roberta", HeadKind::kBase, 2, DenseActivation::kTanh, true},
        FamilyCase{"xlmr_token_cls", "xlm-roberta", HeadKind::kTokenClassification, 2,
                   DenseActivation::kTanh, false},
        FamilyCase{"xlmr_qa", "xlm-roberta", HeadKind::kQuestionAnswering, 2,
                   DenseActivation::kTanh, false},
        FamilyCase{"xlmr_reranker", "xlm-roberta", HeadKind::kSequenceClassification, 2,
                   DenseActivation::kTanh, true},
        FamilyCase{"xlmr_sentence_mean", "xlm-roberta", HeadKind::kSentenceEmbedding, 2,
                   DenseActivation::kTanh, true},
        FamilyCase{"camembert_seq_cls", "camembert", HeadKind::kSequenceClassification, 2,
                   DenseActivation::kTanh, true},
        FamilyCase{"distilbert_seq_cls", "distilbert", HeadKind::kSequenceClassification, 0,
                   DenseActivation::kRelu, true},
        FamilyCase{"distilbert_token_cls", "distilbert", HeadKind::kTokenClassification, 0,
                   DenseActivation::kRelu, false},
        FamilyCase{"distilbert_qa", "distilbert", HeadKind::kQuestionAnswering, 0,
                   DenseActivation::kRelu, false},
        FamilyCase{"distilbert_sentence_cls", "distilbert", HeadKind::kSentenceEmbedding, 0,
                   DenseActivation::kRelu, false},
        FamilyCase{"mpnet_seq_cls", "mpnet", HeadKind::kSequenceClassification, 2,
                   DenseActivation::kTanh, true},
        FamilyCase{"mpnet_token_cls", "mpnet", HeadKind::kTokenClassification, 2,
                   DenseActivation::kTanh, false},
        FamilyCase{"mpnet_sentence_mean", "mpnet", HeadKind::kSentenceEmbedding, 2,
                   DenseActivation::kTanh, true}),
    [](const auto& info) { return std::string(info.param.dir); });

TEST(Importer, DistilBertNamesMapOntoBertsLayout) {
  auto l = Load(ModelDir("distilbert_seq_cls"));
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  auto file = SafetensorsFile::Open(ModelDir("distilbert_seq_cls") + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  auto same = [&](const Tensor& t, const char* name) {
    ASSERT_NE(file->Find(name), nullptr) << name;
    const Tensor src = file->View(*file->Find(name));
    ASSERT_EQ(t.nbytes(), src.nbytes()) << name;
    EXPECT_EQ(std::memcmp(t.raw(), src.raw(), src.nbytes()), 0) << name;
  };
  const ModelWeights& w = (*l.model)->weights;
  same(w.layers[1].key_w, "distilbert.transformer.layer.1.attention.k_lin.weight");
  same(w.layers[0].ffn_ln_beta, "distilbert.transformer.layer.0.output_layer_norm.bias");
  same(w.pooler_w, "pre_classifier.weight");
  same(w.classifier_b, "classifier.bias");
}

// SPLADE (scripts/make_family_models.py): each family's masked-LM head bound
// by its names, the decoder tied to the word embeddings (save_pretrained
// writes no copy), and a SparseEncoder's pooling options read.
TEST(Importer, SpladeModelsBindTheirMaskedLmHeads) {
  struct Case {
    const char* dir;
    const char* transform;  // the head's dense weight in the checkpoint
    bool sum, log1p_twice;
    HiddenAct activation;
  };
  for (const Case& c : {Case{"splade_bert", "cls.predictions.transform.dense.weight", false,
                             false, HiddenAct::kGelu},
                        Case{"xlmr_splade", "lm_head.dense.weight", false, false, HiddenAct::kGelu},
                        Case{"distilbert_splade", "vocab_transform.weight", false, false,
                             HiddenAct::kGelu},
                        Case{"splade_st_sum", "cls.predictions.transform.dense.weight", true, true,
                             HiddenAct::kGeluTanh}}) {
    SCOPED_TRACE(c.dir);
    Loaded l = Load(ModelDir(c.dir));
    ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
    const Model& m = **l.model;
    EXPECT_EQ(m.config.head, HeadKind::kSparseEmbedding);
    EXPECT_EQ(m.config.splade_sum, c.sum);
    EXPECT_EQ(m.config.splade_log1p_twice, c.log1p_twice);
    EXPECT_EQ(m.config.mlm_activation, c.activation);
    EXPECT_TRUE(m.weights.mlm_decoder_w.empty());
    EXPECT_EQ(m.weights.mlm_decoder().raw(), m.weights.word_embeddings.raw());
    EXPECT_EQ(m.weights.mlm_decoder_b.shape(), (std::vector<int64_t>{m.config.vocab_size}));
    auto file = SafetensorsFile::Open(ModelDir(c.dir) + "/model.safetensors");
    ASSERT_TRUE(file.ok());
    ASSERT_NE(file->Find(c.transform), nullptr);
    const Tensor src = file->View(*file->Find(c.transform));
    ASSERT_EQ(m.weights.mlm_dense_w.nbytes(), src.nbytes());
    EXPECT_EQ(std::memcmp(m.weights.mlm_dense_w.raw(), src.raw(), src.nbytes()), 0);
    // The one notice says how the model is served; every tensor was bound.
    ASSERT_EQ(l.notices.size(), 1u) << l.notices[0];
    EXPECT_NE(l.notices[0].find("SPLADE"), std::string::npos) << l.notices[0];
    EXPECT_EQ(DescribeOutputs(m)[0].name, "sparse_embedding");
    EXPECT_EQ(DescribeOutputs(m)[0].width, m.config.vocab_size);
  }
}

// ModernBERT (scripts/make_family_models.py): its structure from config.json
// (transformers 5's rope_parameters and layer_types), Wqkv split into the
// file's Q, K and V rows, the first layer without an attention LayerNorm, and
// zeros where the config leaves biases out.
TEST(Importer, ModernBertStructureAndNames) {
  for (const char* dir : {"modernbert_seq_cls", "modernbert_reranker"}) {
    SCOPED_TRACE(dir);
    const bool biases = std::string(dir) == "modernbert_reranker";
    auto l = Load(ModelDir(dir));
    ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
    for (const std::string& n : l.notices) ADD_FAILURE() << n;  // every tensor bound
    const Model& m = **l.model;
    const ModelConfig& c = m.config;
    EXPECT_TRUE(c.pre_norm);
    EXPECT_TRUE(c.gated_ffn);
    EXPECT_TRUE(c.prediction_head);
    EXPECT_FLOAT_EQ(c.rope_theta, 160000.0f);
    EXPECT_FLOAT_EQ(c.local_rope_theta, 10000.0f);
    EXPECT_EQ(c.local_window, 4);
    EXPECT_EQ(c.global_attention_every, 3);
    EXPECT_FALSE(c.local_layer(0));
    EXPECT_TRUE(c.local_layer(1));
    EXPECT_TRUE(c.local_layer(2));
    EXPECT_FALSE(c.local_layer(3));
    EXPECT_EQ(c.classifier_mean_pooling, !biases);
    EXPECT_EQ(c.hidden_act, biases ? HiddenAct::kGeluTanh : HiddenAct::kGelu);
    EXPECT_EQ(c.pooler_activation, DenseActivation::kGelu);
    EXPECT_FALSE(c.takes_token_types);
    EXPECT_EQ(c.max_positions(), 64);
    EXPECT_TRUE(m.weights.position_embeddings.empty());
    EXPECT_TRUE(m.weights.layers[0].attn_ln_gamma.empty());
    EXPECT_FALSE(m.weights.layers[1].attn_ln_gamma.empty());
    EXPECT_EQ(m.weights.layers[0].ffn_in_w.shape(), (std::vector<int64_t>{2 * 37, 32}));
    auto file = SafetensorsFile::Open(ModelDir(dir) + "/model.safetensors");
    ASSERT_TRUE(file.ok());
    const Tensor qkv = file->View(*file->Find("model.layers.2.attn.Wqkv.weight"));
    const size_t block = 32 * 32 * sizeof(float);
    const auto* bytes = static_cast<const char*>(qkv.raw());
    const LayerWeights& layer = m.weights.layers[2];
    EXPECT_EQ(std::memcmp(layer.query_w.raw(), bytes, block), 0);
    EXPECT_EQ(std::memcmp(layer.key_w.raw(), bytes + block, block), 0);
    EXPECT_EQ(std::memcmp(layer.value_w.raw(), bytes + 2 * block, block), 0);
    // Absent biases read as zeros; present ones as the file has them.
    const float* bias = layer.ffn_out_b.f32();
    EXPECT_EQ(std::all_of(bias, bias + 32, [](float v) { return v == 0.0f; }), !biases);
  }
}

TEST(Importer, F32WeightsAreTheFileBytes) {
  auto l = Load(ModelDir("seq_cls"));
  ASSERT_TRUE(l.model.ok());
  auto file = SafetensorsFile::Open(ModelDir("seq_cls") + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  const Tensor ref = file->View(*file->Find("bert.encoder.layer.1.output.dense.weight"));
  const Tensor& got = (*l.model)->weights.layers[1].ffn_out_w;
  ASSERT_EQ(got.nbytes(), ref.nbytes());
  EXPECT_EQ(std::memcmp(got.raw(), ref.raw(), ref.nbytes()), 0);
}

TEST(Importer, ParameterCountMatchesTransformers) {
  // transformers' BertForSequenceClassification(num_labels=3) at these sizes.
  auto l = Load(ModelDir("seq_cls"));
  ASSERT_TRUE(l.model.ok());
  const size_t H = 32, I = 37, V = 512, P = 64, T = 2, L = 2, N = 3;
  const size_t layer = 4 * (H * H + H) + 2 * 2 * H + (I * H + I) + (H * I + H);
  EXPECT_EQ((*l.model)->ParameterCount(),
            (V + P + T) * H + 2 * H + L * layer + (H * H + H) + (N * H + N));
}

// ---- fp16 / bf16 ----

TEST(DTypeConversion, HalfExhaustive) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    const float got = HalfToFloat(h);
    if (exp == 31) {
      if (mant == 0)
        EXPECT_EQ(got, sign * INFINITY) << bits;
      else
        EXPECT_TRUE(std::isnan(got)) << bits;
      continue;
    }
    const float want = exp == 0 ? sign * std::ldexp(static_cast<float>(mant), -24)
                                : sign * std::ldexp(1.0f + mant / 1024.0f, exp - 15);
    ASSERT_EQ(got, want) << "half bits " << bits;
    EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << bits;
  }
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
}

// The vectorized array conversions give exactly the scalar ones' bits: every
// half value (at odd offsets, so loads are unaligned), and floats of every
// kind (normal, subnormal, overflowing, ties, infinities, NaNs) in blocks
// that mix them.
TEST(DTypeConversion, ArraysMatchScalarBitForBit) {
  std::vector<uint16_t> halves(65536 + 3);
  for (uint32_t b = 0; b < 65536; ++b) halves[b + 1] = static_cast<uint16_t>(b);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    std::vector<float> wide(65536);
    WidenToFloat(dtype, halves.data() + 1, 65536, wide.data());
    for (uint32_t b = 0; b < 65536; ++b) {
      const float want = dtype == DType::kF16 ? HalfToFloat(static_cast<uint16_t>(b))
                                              : BFloat16ToFloat(static_cast<uint16_t>(b));
      ASSERT_EQ(std::memcmp(&wide[b], &want, 4), 0) << "bits " << b;
    }
  }
  std::mt19937 rng(3);
  std::vector<float> floats;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    if (i % 3 == 0) bits = (bits & 0x80001FFFu) | ((100u + rng() % 60u) << 23);   // near half range
    if (i % 5 == 0) bits = (bits & 0x8000E000u) | 0x38000000u | (rng() % 4096u);  // subnormal ties
    float f;
    std::memcpy(&f, &bits, 4);
    floats.push_back(f);
  }
  for (float special : {INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65520.0f, 65519.99f, 0.0f, -0.0f,
                        std::ldexp(1.0f, -25), std::ldexp(1.5f, -25)})
    floats.push_back(special);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> narrow(floats.size());
    NarrowFromFloat(dtype, floats.data(), floats.size(), narrow.data());
    for (size_t i = 0; i < floats.size(); ++i) {
      const uint16_t want =
          dtype == DType::kF16 ? FloatToHalf(floats[i]) : FloatToBFloat16(floats[i]);
      ASSERT_EQ(narrow[i], want) << "float " << floats[i] << " at " << i;
    }
  }
}

TEST(DTypeConversion, BFloat16) {
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(BFloat16ToFloat(0x7f80), INFINITY);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7fc1)));
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));  // subnormal
}

// Every E4M3 code decodes to the format's definition, and re-encodes to itself.
TEST(DTypeConversion, E4M3Exhaustive) {
  for (int code = 0; code < 256; ++code) {
    const int exp = (code >> 3) & 0xf, mant = code & 7;
    const float sign = (code & 0x80) ? -1.0f : 1.0f;
    const float got = E4M3ToFloat(static_cast<uint8_t>(code));
    if (exp == 15 && mant == 7) {
      EXPECT_TRUE(std::isnan(got)) << code;
      EXPECT_EQ(FloatToE4M3(got) & 0x7f, 0x7f) << code;
      continue;
    }
    const float want = exp == 0 ? sign * std::ldexp(static_cast<float>(mant), -9)
                                : sign * std::ldexp(1.0f + mant / 8.0f, exp - 7);
    ASSERT_EQ(got, want) << "code " << code;
    ASSERT_EQ(FloatToE4M3(got), code) << "code " << code;
    ASSERT_EQ(RoundToE4M3(got), got) << "code " << code;
  }
  EXPECT_EQ(E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(E4M3ToFloat(0x08), std::ldexp(1.0f, -6));
}

// FloatToE4M3 is the nearest finite E4M3 value, ties to the even code,
// saturating at +-448 (CUDA's __NV_SATFINITE): checked against a search over
// all 254 finite values, on random floats and on every midpoint.
TEST(DTypeConversion, E4M3RoundsToNearestEvenAndSaturates) {
  std::vector<std::pair<float, int>> values;  // positive finite values, ascending
  for (int code = 0; code < 0x7f; ++code) values.emplace_back(E4M3ToFloat(code), code);
  auto nearest = [&](float f) {
    const float a = std::fabs(f);
    int best = 0;
    for (size_t i = 1; i < values.size(); ++i) {
      const double d = std::fabs(double(a) - values[i].first),
                   b = std::fabs(double(a) - values[best].first);
      if (d < b || (d == b && (values[i].second & 1) == 0)) best = static_cast<int>(i);
    }
    return static_cast<uint8_t>((std::signbit(f) ? 0x80 : 0) | values[best].second);
  };
  std::vector<float> probes;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float mid = (values[i].first + values[i + 1].first) / 2;  // exact in fp32
    probes.insert(probes.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid});
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> log2(-12.0f, 9.5f);
  for (int i = 0; i < 20000; ++i)
    probes.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(log2(rng)));
  for (float f : probes) {
    ASSERT_EQ(FloatToE4M3(f), nearest(f)) << "float " << f;
    ASSERT_EQ(RoundToE4M3(f), E4M3ToFloat(nearest(f))) << "float " << f;
  }
  EXPECT_EQ(FloatToE4M3(464.0f), 0x7e);  // the tie with 480 (not a value): saturates
  EXPECT_EQ(FloatToE4M3(1e9f), 0x7e);
  EXPECT_EQ(FloatToE4M3(-INFINITY), 0xfe);
  EXPECT_EQ(FloatToE4M3(std::ldexp(1.0f, -11)), 0x00);  // a quarter of the smallest: 0
  EXPECT_EQ(FloatToE4M3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 subnormal steps: even, 2
}

// seq_cls_f16 / _bf16 hold seq_cls's weights rounded to nearest; the loaded
// fp32 values must be exactly those roundings.
// Below `min_normal` the format is subnormal with a fixed spacing.
void ExpectRoundedCopy(const char* dir, int mantissa_bits, float min_normal) {
  auto ref = Load(ModelDir("seq_cls"));
  auto low = Load(ModelDir(dir));
  ASSERT_TRUE(ref.model.ok() && low.model.ok());
  const auto& a = (*ref.model)->weights;
  const auto& b = (*low.model)->weights;
  for (auto [x, y] :
       {std::pair{&a.word_embeddings, &b.word_embeddings},
        std::pair{&a.layers[1].ffn_in_w, &b.layers[1].ffn_in_w},
        std::pair{&a.emb_ln_gamma, &b.emb_ln_gamma}, std::pair{&a.classifier_w, &b.classifier_w}}) {
    const std::vector<float> xs = Values(*x), ys = Values(*y);
    ASSERT_EQ(xs.size(), ys.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      int e = 0;
      std::frexp(xs[i], &e);
      const float half_ulp =
          std::ldexp(1.0f, std::max(e, std::ilogb(min_normal) + 1) - 2 - mantissa_bits);
      ASSERT_LE(std::fabs(xs[i] - ys[i]), half_ulp) << dir << " element " << i;
      const float scaled = std::ldexp(ys[i], -(e - 1) + mantissa_bits);
      if (std::fabs(xs[i]) >= 2 * min_normal)
        ASSERT_EQ(scaled, std::nearbyint(scaled)) << dir << " element " << i;
    }
  }
}

TEST(DTypeConversion, F16ModelIsRoundedF32Model) {
  ExpectRoundedCopy("seq_cls_f16", 10, std::ldexp(1.0f, -14));
}
TEST(DTypeConversion, BF16ModelIsRoundedF32Model) { ExpectRoundedCopy("seq_cls_bf16", 7, FLT_MIN); }

// ---- sharded, junk ----

TEST(Importer, ShardedCheckpointUsesBothShards) {
  auto l = Load(ModelDir("sharded"));
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  EXPECT_FALSE((*l.model)->weights.word_embeddings.empty());
  EXPECT_FALSE((*l.model)->weights.classifier_w.empty());
  EXPECT_TRUE(l.notices.empty());
}

TEST(Importer, TrainingJunkSkippedWithOneNotice) {
  auto l = Load(ModelDir("training_junk"));
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  ASSERT_EQ(l.notices.size(), 1u);
  EXPECT_NE(l.notices[0].find("skipped 7 training-only"), std::string::npos) << l.notices[0];
  EXPECT_NE(l.notices[0].find("adam_m"), std::string::npos) << l.notices[0];
}

// The tokenizer comes from the same directory (vocab.txt or tokenizer.json)
// and agrees with the HF tokenizer recorded in golden.json.
TEST(LoadModelAndTokenizer, MatchesGoldenInputIds) {
  for (const char* name : {"seq_cls", "sentence_cls", "token_cls", "sentence_mean",
                           "distilbert_qa", "xlmr_reranker", "roberta_seq_cls"}) {
    auto loaded = LoadModelAndTokenizer(ModelDir(name));
    ASSERT_TRUE(loaded.ok()) << name << ": " << loaded.status().ToString();
    EXPECT_LE(loaded->tokenizer->vocab_size(),
              static_cast<size_t>(loaded->model->config.vocab_size));
    const nlohmann::json golden =
        nlohmann::json::parse(std::ifstream(ModelDir(name) + "/golden.json"));
    const size_t max_length = static_cast<size_t>(loaded->model->config.max_seq_length);
    for (const nlohmann::json& in : golden["inputs"]) {
      std::optional<std::string> pair;
      if (in.contains("text_pair")) pair = in["text_pair"].get<std::string>();
      auto enc = loaded->tokenizer->Encode(in["text"].get<std::string>(), pair, max_length);
      ASSERT_TRUE(enc.ok()) << enc.status().ToString();
      EXPECT_EQ(enc->input_ids, in["input_ids"].get<std::vector<int32_t>>())
          << name << ": " << in["text"];
      EXPECT_EQ(enc->token_type_ids, in["token_type_ids"].get<std::vector<int32_t>>());
    }
  }
}

TEST(LoadModelAndTokenizer, ModelErrorComesFirst) {
  auto loaded = LoadModelAndTokenizer("/nonexistent/model");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
}

TEST(Importer, NotADirectory) {
  auto missing = Load("/nonexistent/model");
  ASSERT_FALSE(missing.model.ok());
  EXPECT_EQ(missing.model.status().code(), StatusCode::kNotFound);
  auto file = Load(ModelDir("base") + "/config.json");
  ASSERT_FALSE(file.model.ok());
  EXPECT_EQ(file.model.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bertrt

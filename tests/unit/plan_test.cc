// Plan files: round trips (bitwise for fp32), fp16/bf16 plans on the CPU, and
// hostile files (truncated, flipped bits, bad offsets, sizes, counts, JSON).
#include "bertrt/plan.h"
#include "bertrt/self_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bertrt/engine.h"
#include "bertrt/importer.h"
#include "bertrt/quantized_weights.h"
#include "core/crc32c.h"
#include "builder/plan_format.h"
#include "builder/plan_layout.h"

namespace bertrt {
namespace {

namespace fs = std::filesystem;

std::string ModelDir(const std::string& name) {
  return std::string(BERTRT_TEST_DATA_DIR) + "/models/" + name;
}

// ctest runs each test in its own process, several at once: the pid keeps
// their files apart.
std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() /
          ("bertrt_plan_test_" + std::to_string(getpid()) + "_" + name + ".plan"))
      .string();
}

// Two entries shaped like TimeGemms's (the CPU engine never reads them).
const std::vector<GemmChoice> kChoices = {
    {"NVIDIA H200|cublasLt 130100|fp16|96,64,32|0", std::string(128, 'a')},
    {"NVIDIA H200|cublasLt 130100|fp16|32,64,32|1", std::string(64, '0') + std::string(64, 'f')}};

std::string BuildPlan(const std::string& model, Precision precision = Precision::kFp32,
                      const std::vector<GemmChoice>& choices = {}) {
  auto loaded = LoadModelAndTokenizer(ModelDir(model));
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto tok = ReadTokenizerSource(ModelDir(model));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  PlanBuildOptions options;
  options.precision = precision;
  options.gemm_choices = choices;
  const std::string path = TempPath(model + "_" + PrecisionName(precision));
  Status st = WritePlan(*loaded->model, *tok, options, "crc32c:test", path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<Plan> FromBytes(const std::string& bytes) {
  auto copy = std::make_shared<std::string>(bytes);
  return ReadPlanFromMemory(*copy, copy, "test.plan");
}

const std::vector<std::pair<std::string, std::optional<std::string>>> kTexts = {
    {"hello world", std::nullopt},
    {"the quick brown fox jumps over the lazy dog", std::string("a pair of texts")},
    {"今天天气很好", std::nullopt},
};

RaggedBatch Encode(const Tokenizer& tok) {
  RaggedBatch batch;
  for (const auto& [text, pair] : kTexts) {
    auto enc = tok.Encode(text, pair, 64);
    EXPECT_TRUE(enc.ok());
    batch.Add(enc->input_ids, enc->token_type_ids);
  }
  return batch;
}

BatchOutputs RunCpu(std::shared_ptr<const Model> model, const RaggedBatch& batch) {
  auto engine = CreateCpuEngine(std::move(model), {1});
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  RunOptions options;
  options.last_hidden_state = true;
  auto out = (*engine)->Run(batch, options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return std::move(out).value();
}

class PlanRoundTrip : public testing::TestWithParam<std::string> {};

TEST_P(PlanRoundTrip, Fp32PlanGivesBitwiseIdenticalOutputs) {
  const std::string path = BuildPlan(GetParam());
  auto hf = LoadModelAndTokenizer(ModelDir(GetParam()));
  auto plan = ReadPlan(path);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->info.format_version, kPlanFormatVersion);
  EXPECT_EQ(plan->info.precision, "fp32");
  EXPECT_EQ(plan->model->config.head, hf->model->config.head);
  EXPECT_EQ(plan->model->config.labels, hf->model->config.labels);
  EXPECT_EQ(plan->model->config.max_seq_length, hf->model->config.max_seq_length);
  EXPECT_EQ(plan->tokenizer->Vocabulary(), hf->tokenizer->Vocabulary());
  const RaggedBatch batch = Encode(*hf->tokenizer);
  const RaggedBatch plan_batch = Encode(*plan->tokenizer);
  EXPECT_EQ(batch.input_ids, plan_batch.input_ids);
  EXPECT_EQ(batch.token_type_ids, plan_batch.token_type_ids);
  const BatchOutputs want = RunCpu(hf->model, batch), got = RunCpu(plan->model, batch);
  ASSERT_EQ(want.outputs.size(), got.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    EXPECT_EQ(want.outputs[i].name, got.outputs[i].name);
    ASSERT_EQ(want.outputs[i].data.size(), got.outputs[i].data.size());
    EXPECT_EQ(0, std::memcmp(want.outputs[i].data.data(), got.outputs[i].data.data(),
                             want.outputs[i].data.size() * sizeof(float)))
        << want.outputs[i].name;
  }
  fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(EveryHead, PlanRoundTrip,
                         testing::Values("base", "seq_cls", "token_cls", "qa", "sentence_mean",
                                         "sentence_cls", "sentence_max", "seq_cls_f16", "sharded"));

// Every config field a plan stores comes back as written (each set away from
// its default here, so a field written under one key and read from another,
// or not read, shows); and a plan from before the optional fields existed
// reads with their defaults.
TEST(PlanLayout, ConfigRoundTripsEveryField) {
  ModelConfig c;
  c.architecture = "XForTest";
  c.model_type = "x";
  c.vocab_size = 1001;
  c.hidden_size = 96;
  c.num_layers = 3;
  c.num_heads = 6;
  c.intermediate_size = 200;
  c.max_position_embeddings = 130;
  c.type_vocab_size = 3;
  c.layer_norm_eps = 1e-5f;
  c.hidden_act = HiddenAct::kGeluTanh;
  c.pad_token_id = 1;
  c.position_offset = 2;
  c.takes_token_types = false;
  c.pooler_activation = DenseActivation::kSigmoid;
  c.relative_attention_buckets = 32;
  c.pre_norm = c.gated_ffn = c.classifier_mean_pooling = c.prediction_head = true;
  c.rope_theta = 160000.0f;
  c.local_rope_theta = 10000.0f;
  c.local_window = 64;
  c.global_attention_every = 3;
  c.mlm_activation = HiddenAct::kRelu;
  c.head = HeadKind::kSentenceEmbedding;
  c.num_labels = 2;
  c.labels = {"no", "yes"};
  c.pooling_modes = {Pooling::kCls, Pooling::kMax};
  c.dense = {{192, 50, false, DenseActivation::kGelu}};
  c.normalize = true;
  c.truncate_dim = 40;
  c.prompts = {{"query", "query: "}, {"doc", "passage: "}};
  c.default_prompt_name = "doc";
  c.include_prompt = false;
  c.splade_sum = c.splade_log1p_twice = true;
  c.max_seq_length = 100;
  const nlohmann::json written = plan::ConfigToJson(c);
  auto read = plan::ConfigFromJson(written);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(plan::ConfigToJson(*read), written);
  EXPECT_EQ(read->rope_theta, c.rope_theta);
  EXPECT_EQ(read->dense.size(), 1u);
  EXPECT_EQ(read->prompts, c.prompts);

  // The first plans' fields alone.
  nlohmann::json first = written;
  for (const char* later :
       {"position_offset", "takes_token_types", "pooler_activation", "relative_attention_buckets",
        "mlm_activation", "splade_sum", "splade_log1p_twice", "pre_norm", "gated_ffn",
        "classifier_mean_pooling", "prediction_head", "rope_theta", "local_rope_theta",
        "local_window", "global_attention_every", "dense", "truncate_dim", "prompts",
        "default_prompt_name", "include_prompt"})
    first.erase(later);
  auto old = plan::ConfigFromJson(first);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  const ModelConfig defaults;
  EXPECT_EQ(old->position_offset, defaults.position_offset);
  EXPECT_EQ(old->takes_token_types, defaults.takes_token_types);
  EXPECT_EQ(old->pre_norm, defaults.pre_norm);
  EXPECT_EQ(old->rope_theta, defaults.rope_theta);
  EXPECT_TRUE(old->dense.empty());
  EXPECT_TRUE(old->prompts.empty());
  EXPECT_EQ(old->include_prompt, defaults.include_prompt);
  // A field every plan has is required.
  for (const char* always : {"hidden_size", "layer_norm_eps", "pooling", "labels", "normalize"}) {
    nlohmann::json without = written;
    without.erase(always);
    auto missing = plan::ConfigFromJson(without);
    ASSERT_FALSE(missing.ok()) << always;
    EXPECT_NE(missing.status().message().find(always), std::string::npos)
        << missing.status().message();
  }
}

TEST(Plan, Fp32TensorsAreViewsOfTheFile) {
  const std::string path = BuildPlan("seq_cls");
  const std::string bytes = ReadAll(path);
  auto owner = std::make_shared<std::vector<uint64_t>>((bytes.size() + 7) / 8);
  std::memcpy(owner->data(), bytes.data(), bytes.size());
  std::string_view view(reinterpret_cast<const char*>(owner->data()), bytes.size());
  auto plan = ReadPlanFromMemory(view, owner, "mem.plan");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto* p = static_cast<const char*>(plan->model->weights.layers[0].key_w.raw());
  EXPECT_GE(p, view.data());
  EXPECT_LT(p, view.data() + view.size());
  fs::remove(path);
}

class HalfPlan : public testing::TestWithParam<Precision> {};

// The compute-precision tensors stay fp16/bf16 views of the file (what the
// CUDA engine uploads); the CPU engine widens its own copy and matches the
// fp32 reference within the build's thresholds.
TEST_P(HalfPlan, KeepsStoredDtypesAndRunsOnTheCpuWithCloseOutputs) {
  const std::string path = BuildPlan("seq_cls", GetParam());
  auto plan = ReadPlan(path);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const DType half = GetParam() == Precision::kFp16 ? DType::kF16 : DType::kBF16;
  const ModelWeights& w = plan->model->weights;
  EXPECT_EQ(w.word_embeddings.dtype(), half);
  EXPECT_EQ(w.layers[0].key_w.dtype(), half);
  EXPECT_EQ(w.layers[0].value_b.dtype(), half);
  EXPECT_EQ(w.layers[0].attn_ln_gamma.dtype(), DType::kF32);
  EXPECT_EQ(w.classifier_w.dtype(), DType::kF32);
  auto widened = WithFloat32Weights(plan->model);
  EXPECT_NE(widened.get(), plan->model.get());
  EXPECT_EQ(widened->weights.layers[0].key_w.dtype(), DType::kF32);
  EXPECT_EQ(widened->weights.layers[0].key_w.shape(), w.layers[0].key_w.shape());
  EXPECT_EQ(WithFloat32Weights(widened).get(), widened.get());  // already fp32: no copy
  EXPECT_LT(fs::file_size(path), fs::file_size(BuildPlan("seq_cls")));
  auto hf = LoadModelAndTokenizer(ModelDir("seq_cls"));
  const RaggedBatch batch = Encode(*hf->tokenizer);
  auto ref = CreateCpuEngine(hf->model, {1});
  auto cand = CreateCpuEngine(plan->model, {1});
  auto report = CompareEngines(DescribeOutputs(*hf->model), **ref, **cand, *hf->tokenizer,
                               BuiltInVerifySamples(), 64);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_GT(report->min_cosine, 0.999);
  EXPECT_GT(report->max_abs_diff, 0.0);  // the weights really were rounded
  EXPECT_TRUE(CheckVerifyThresholds(*report, GetParam()).ok());
  fs::remove(path);
}

// A plan rebuilt from a half plan: at its own precision the tensor bytes are
// copied as they are (the files are identical but for the metadata), and at
// fp32 it is the exact widening, so the CPU engine gives the same bits.
TEST_P(HalfPlan, RebuildsFromItself) {
  const std::string path = BuildPlan("seq_cls", GetParam());
  auto plan = ReadPlan(path);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto tok = ReadTokenizerSource(ModelDir("seq_cls"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (Precision target : {GetParam(), Precision::kFp32}) {
    PlanBuildOptions options;
    options.precision = target;
    const std::string again = TempPath(std::string("again_") + PrecisionName(target));
    ASSERT_TRUE(WritePlan(*plan->model, *tok, options, "crc32c:test", again).ok());
    auto reread = ReadPlan(again);
    ASSERT_TRUE(reread.ok()) << reread.status().ToString();
    const Tensor& a = plan->model->weights.layers[0].ffn_in_w;
    const Tensor& b = reread->model->weights.layers[0].ffn_in_w;
    if (target == GetParam()) {
      ASSERT_EQ(a.nbytes(), b.nbytes());
      EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes()));
    }
    const RaggedBatch batch = Encode(*plan->tokenizer);
    const BatchOutputs want = RunCpu(plan->model, batch), got = RunCpu(reread->model, batch);
    ASSERT_EQ(want.outputs.size(), got.outputs.size());
    for (size_t i = 0; i < want.outputs.size(); ++i)
      EXPECT_EQ(want.outputs[i].data, got.outputs[i].data) << PrecisionName(target);
    fs::remove(again);
  }
  fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Fp16AndBf16, HalfPlan,
                         testing::Values(Precision::kFp16, Precision::kBf16));

// Hostile edits: the test re-seals the checksums after an edit, so it is the
// reader's validation, not only the CRCs, that must refuse the file.
class HostilePlan : public testing::Test {
 protected:
  void SetUp() override {
    const std::string path = BuildPlan("token_cls", Precision::kFp32, kChoices);
    bytes_ = ReadAll(path);
    fs::remove(path);
  }
  uint8_t* at(size_t off) { return reinterpret_cast<uint8_t*>(bytes_.data()) + off; }
  uint64_t table() { return plan::GetU64(at(24)); }
  uint32_t count() { return plan::GetU32(at(32)); }
  uint8_t* entry(size_t i) { return at(table() + i * plan::kEntrySize); }
  size_t Find(const std::string& name) {
    for (size_t i = 0; i < count(); ++i)
      if (plan::DecodeEntry(entry(i)).name == name) return i;
    ADD_FAILURE() << name;
    return 0;
  }
  void Reseal() {
    plan::PutU32(at(plan::kTableCrcAt), Crc32c(at(table()), count() * plan::kEntrySize));
    plan::SealHeader(at(0));
  }
  void ResealSection(size_t i) {
    plan::Entry e = plan::DecodeEntry(entry(i));
    plan::PutU32(entry(i) + plan::kEntryCrcAt, Crc32c(at(e.offset), e.length));
    Reseal();
  }
  // Replaces the metadata JSON in place (padded with spaces).
  void SetMeta(const std::string& json) { SetSection("meta", json); }
  void SetSection(const std::string& name, const std::string& json) {
    const size_t i = Find(name);
    plan::Entry e = plan::DecodeEntry(entry(i));
    ASSERT_LE(json.size(), e.length);
    std::memset(at(e.offset), ' ', e.length);
    std::memcpy(at(e.offset), json.data(), json.size());
    ResealSection(i);
  }
  nlohmann::json Meta() {
    plan::Entry e = plan::DecodeEntry(entry(Find("meta")));
    return nlohmann::json::parse(bytes_.substr(e.offset, e.length));
  }
  void ExpectError(const std::string& fragment) {
    auto plan = FromBytes(bytes_);
    ASSERT_FALSE(plan.ok()) << "accepted; expected: " << fragment;
    EXPECT_NE(plan.status().message().find(fragment), std::string::npos) << plan.status().message();
  }
  std::string bytes_;
};

TEST_F(HostilePlan, IntactPlanLoads) { EXPECT_TRUE(FromBytes(bytes_).ok()); }

TEST_F(HostilePlan, OtherFormatVersionNamesBothAndTheRebuildCommand) {
  plan::PutU32(at(8), 7);
  auto plan = FromBytes(bytes_);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("plan format version 7"), std::string::npos);
  EXPECT_NE(plan.status().message().find("reads plan format version 1"), std::string::npos);
  EXPECT_NE(plan.status().message().find("rebuild with: bertrt build"), std::string::npos);
}

// Once the metadata is read, the command to rebuild says how the plan was built.
TEST_F(HostilePlan, RebuildCommandKeepsThePrecision) {
  nlohmann::json meta = Meta();
  meta["config"]["hidden_size"] = 0;
  SetMeta(meta.dump());
  auto plan = FromBytes(bytes_);
  ASSERT_FALSE(plan.ok());
  const std::string want = "--precision " + meta["precision"].get<std::string>() + " -o ";
  EXPECT_NE(plan.status().message().find(want), std::string::npos) << plan.status().message();
}

TEST_F(HostilePlan, EveryTruncationIsRejected) {
  const std::string whole = bytes_;
  for (size_t n : {size_t{0}, size_t{7}, size_t{11}, size_t{63}, size_t{64}, whole.size() / 2,
                   whole.size() - plan::kEntrySize, whole.size() - 1}) {
    auto plan = FromBytes(whole.substr(0, n));
    EXPECT_FALSE(plan.ok()) << n;
  }
}

TEST_F(HostilePlan, FlippedBitInATensorFailsItsChecksum) {
  plan::Entry e = plan::DecodeEntry(entry(Find("layers.1.ffn_in_w")));
  *at(e.offset + e.length / 2) ^= 0x10;
  ExpectError("layers.1.ffn_in_w");
  ExpectError("CRC32C");
}

TEST_F(HostilePlan, FlippedBitInTheTableOrHeaderIsCaught) {
  *entry(3) ^= 1;
  ExpectError("table checksum");
  *entry(3) ^= 1;
  *at(20) ^= 1;
  ExpectError("header checksum");
}

TEST_F(HostilePlan, OffsetPastTheEnd) {
  plan::PutU64(entry(Find("classifier_w")) + 112, (bytes_.size() + 4096) / 64 * 64);
  Reseal();
  ExpectError("outside the data area");
}

TEST_F(HostilePlan, HugeLengthDoesNotWrap) {
  plan::PutU64(entry(Find("tokenizer")) + 120, ~uint64_t{0} - 10);
  Reseal();
  ExpectError("outside the data area");
}

TEST_F(HostilePlan, OverlappingSections) {
  plan::Entry first = plan::DecodeEntry(entry(Find("layers.0.qkv_w")));
  plan::PutU64(entry(Find("layers.0.qkv_b")) + 112, first.offset);
  Reseal();
  ExpectError("overlap");
}

TEST_F(HostilePlan, MisalignedOffset) {
  const size_t i = Find("embeddings.ln_gamma");
  plan::PutU64(entry(i) + 112, plan::DecodeEntry(entry(i)).offset + 4);
  Reseal();
  ExpectError("not 64-byte aligned");
}

TEST_F(HostilePlan, SectionCountTooLarge) {
  plan::PutU32(at(32), 1u << 30);
  Reseal();
  ExpectError("section count");
}

TEST_F(HostilePlan, ShapeThatDisagreesWithTheLength) {
  plan::PutU64(entry(Find("embeddings.word")) + 80, 1u << 30);
  Reseal();
  ExpectError("shape needs");
}

TEST_F(HostilePlan, OverflowingShape) {
  uint8_t* e = entry(Find("embeddings.word"));
  plan::PutU64(e + 80, uint64_t{1} << 40);
  plan::PutU64(e + 88, uint64_t{1} << 40);
  Reseal();
  ExpectError("bad dimension");
}

TEST_F(HostilePlan, BadDtypeAndRank) {
  uint8_t* e = entry(Find("embeddings.word"));
  plan::PutU32(e + 68, 99);
  Reseal();
  ExpectError("dtype code 99");
  plan::PutU32(e + 68, 0);
  plan::PutU32(e + 72, 9);
  Reseal();
  ExpectError("rank 9");
}

TEST_F(HostilePlan, UnterminatedName) {
  std::memset(entry(2), 'x', plan::kNameSize);
  Reseal();
  ExpectError("unterminated name");
}

TEST_F(HostilePlan, MetadataThatIsNotJson) {
  SetMeta("{\"config\": [1, 2");
  ExpectError("not a JSON object");
}

TEST_F(HostilePlan, MetadataWithWrongTypes) {
  nlohmann::json meta = Meta();
  meta["config"] = 7;
  SetMeta(meta.dump());
  ExpectError("config");
}

TEST_F(HostilePlan, ConfigThatDisagreesWithTheTensors) {
  nlohmann::json meta = Meta();
  meta["config"]["hidden_size"] = 64;
  meta["config"]["num_heads"] = 4;
  SetMeta(meta.dump());
  ExpectError("expected");
  meta["config"]["hidden_size"] = 32;
  meta["config"]["num_layers"] = 3;
  SetMeta(meta.dump());
  ExpectError("tensor sections");
}

TEST_F(HostilePlan, ConfigOutOfRange) {
  nlohmann::json meta = Meta();
  meta["config"]["vocab_size"] = -1;
  SetMeta(meta.dump());
  ExpectError("vocab_size");
  meta["config"]["vocab_size"] = 512;
  meta["config"]["layer_norm_eps"] = 1e300;
  SetMeta(meta.dump());
  ExpectError("layer_norm_eps");
}

TEST_F(HostilePlan, LabelsThatDoNotMatchTheClasses) {
  nlohmann::json meta = Meta();
  meta["config"]["labels"] = {"A", "B"};
  SetMeta(meta.dump());
  ExpectError("labels");
}

TEST_F(HostilePlan, TuningSectionThatIsNotAListOfHexAlgorithms) {
  SetSection("tuning", "[1, 2]");
  ExpectError("no algorithms array");
  SetSection("tuning", R"({"algorithms": [{"gemm": "g"}]})");
  ExpectError("lacks its gemm or algo");
  SetSection("tuning", R"({"algorithms": [{"gemm": "g", "algo": 7}]})");
  ExpectError("lacks its gemm or algo");
  SetSection("tuning", R"({"algorithms": [{"gemm": "g", "algo": "zz"}]})");
  ExpectError("not 128 lowercase hex digits");
  SetSection("tuning",
             R"({"algorithms": [{"gemm": "g", "algo": ")" + std::string(127, 'a') + "G\"}]}");
  ExpectError("not 128 lowercase hex digits");
}

TEST_F(HostilePlan, UnknownTokenizerKind) {
  nlohmann::json meta = Meta();
  meta["tokenizer"]["kind"] = "sentencepiece";
  SetMeta(meta.dump());
  ExpectError("unknown tokenizer kind");
}

// An int8 plan of `model`: its encoder Linears quantized on the test texts
// (calibrated and checked on them), with a budget loose enough for a tiny
// random model that some stay in int8. Returns the quantized model too.
std::string BuildQuantizedPlan(const std::string& model, QuantFormat format,
                               std::shared_ptr<const Model>* quantized) {
  auto loaded = LoadModelAndTokenizer(ModelDir(model));
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto tok = ReadTokenizerSource(ModelDir(model));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  const RaggedBatch batch = Encode(*loaded->tokenizer);
  QuantizeOptions options;
  options.format = format;
  if (format == QuantFormat::kFp8) {
    options.method = CalibrationMethod::kMax;
    options.smoothing_alpha = 0.0f;
  }
  options.calibration = {batch};
  options.held_out = {batch};
  options.budget.cosine_mean = options.budget.cosine_min = 0.9;
  options.budget.top10_overlap = options.budget.argmax = 0.0;
  auto int8 = QuantizeTo8Bits(loaded->model, options, 1, batch);
  EXPECT_TRUE(int8.ok()) << int8.status().ToString();
  *quantized = *int8;
  const std::string path = TempPath(model + "_" + QuantFormatName(format));
  Status st = WritePlan(**int8, *tok, PlanBuildOptions{}, "crc32c:test", path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

// An 8-bit plan (int8, fp8) holds the quantized weights and their scales,
// the report and the check: read back, its engine answers bitwise as the
// engine that quantized the model, without calibrating, and passes the check.
TEST(Plan, QuantizedPlanAnswersAsTheQuantizedModel) {
  for (QuantFormat format : {QuantFormat::kInt8, QuantFormat::kFp8})
  for (const char* name : {"seq_cls", "sentence_mean", "base"}) {
    SCOPED_TRACE(std::string(name) + " " + QuantFormatName(format));
    std::shared_ptr<const Model> quantized;
    const std::string path = BuildQuantizedPlan(name, format, &quantized);
    auto plan = ReadPlan(path);
    fs::remove(path);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->info.precision, QuantFormatName(format));
    ASSERT_TRUE(plan->info.quantization.has_value());
    ASSERT_TRUE(plan->model->quantized);
    const QuantizedWeights &want = *quantized->quantized, &got = *plan->model->quantized;
    EXPECT_EQ(plan->info.quantization->Summary(), want.report.Summary());
    EXPECT_EQ(got.report.Summary(), want.report.Summary());
    EXPECT_EQ(got.report.quantized_linears, int(got.linears.size())) << name;
    // The tiny models' FFN is 37 wide: fp8 keeps both its GEMMs (a width
    // not a multiple of 16) in fp32, and says so.
    const std::vector<std::string> unsupported =
        format == QuantFormat::kFp8
            ? std::vector<std::string>{"layer 0 ffn in", "layer 0 ffn out", "layer 1 ffn in",
                                       "layer 1 ffn out"}
            : std::vector<std::string>{};
    EXPECT_EQ(got.report.unsupported, unsupported);
    EXPECT_GT(got.linears.size(), 0u) << name;
    for (const auto& [weight, linear] : got.linears) {
      EXPECT_EQ(linear.weights.dtype(),
                format == QuantFormat::kFp8 ? DType::kF8E4M3 : DType::kI8)
          << weight;
      EXPECT_EQ(linear.input_scale, want.linears.at(weight).input_scale) << weight;
      EXPECT_EQ(0, std::memcmp(linear.weights.raw(), want.linears.at(weight).weights.raw(),
                               linear.weights.nbytes()))
          << weight;
    }
    EXPECT_EQ(got.check_batch.input_ids, want.check_batch.input_ids);
    EXPECT_EQ(got.check_batch.cu_seqlens, want.check_batch.cu_seqlens);
    EXPECT_EQ(got.check_batch.max_len, want.check_batch.max_len);
    ASSERT_EQ(got.check_outputs.outputs.size(), want.check_outputs.outputs.size());
    for (size_t i = 0; i < got.check_outputs.outputs.size(); ++i)
      EXPECT_EQ(got.check_outputs.outputs[i].data, want.check_outputs.outputs[i].data);
    EXPECT_EQ(plan->model->ParameterCount(), quantized->ParameterCount());

    const RaggedBatch batch = Encode(*plan->tokenizer);
    const BatchOutputs a = RunCpu(quantized, batch), b = RunCpu(plan->model, batch);
    ASSERT_EQ(a.outputs.size(), b.outputs.size());
    for (size_t i = 0; i < a.outputs.size(); ++i)
      EXPECT_EQ(a.outputs[i].data, b.outputs[i].data) << name << " " << a.outputs[i].name;
    auto engine = CreateCpuEngine(plan->model, {1});
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    ASSERT_TRUE((*engine)->Quantization().has_value());
    auto check = CheckQuantizedReproduced(*plan->model, **engine);
    EXPECT_TRUE(check.ok()) << check.status().ToString();
    EXPECT_EQ(check->reproduced.max_abs_diff, 0.0) << name;
    EXPECT_FALSE(check->ours_vs_fp32.has_value()) << name;
    // Calibrating an 8-bit model again is refused.
    CpuEngineOptions again{1};
    again.quantize = QuantizeOptions{};
    EXPECT_FALSE(CreateCpuEngine(plan->model, again).ok());
    QuantizeOptions options;
    options.format = format;
    options.calibration = {batch};
    auto twice = QuantizeTo8Bits(plan->model, options, 1, batch);
    ASSERT_FALSE(twice.ok()) << name;
    EXPECT_NE(twice.status().message().find("is already"), std::string::npos)
        << twice.status().ToString();
  }
}

// The check catches an engine whose int8 answers are not the build's (here:
// the stored answers changed, as another CPU's saturating kernels would).
TEST(Plan, Int8CheckRefusesAnEngineThatAnswersOtherwise) {
  std::shared_ptr<const Model> quantized;
  const std::string path = BuildQuantizedPlan("seq_cls", QuantFormat::kInt8, &quantized);
  fs::remove(path);
  auto engine = CreateCpuEngine(quantized, {1});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto altered = std::make_shared<QuantizedWeights>(*quantized->quantized);
  // (An engine far from both the stored answers and fp32's.)
  for (float& v : altered->check_outputs.outputs[0].data) v = -v + 0.5f;
  for (float& v : altered->check_reference.outputs[0].data) v = -v + 0.5f;
  Model other = *quantized;
  other.quantized = altered;
  auto check = CheckQuantizedReproduced(other, **engine);
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(check.status().message().find("differ from those of the machine that quantized"),
            std::string::npos)
      << check.status().message();
}

// 8 bits on a machine whose activations are not the quantizing engine's (a
// GPU's fp16): answers beyond bf16's thresholds of the quantizing engine's
// pass when they are about as close to fp32's as that engine's were, and
// fail when much further. (The engine is the quantizing one itself; the
// stored answers are moved instead. Adding one constant to a row of logits
// moves its direction, not its argmax.)
TEST(Plan, EightBitCheckHoldsAnEngineToFp32WhereItDoesNotReproduce) {
  for (QuantFormat format : {QuantFormat::kInt8, QuantFormat::kFp8}) {
    SCOPED_TRACE(QuantFormatName(format));
    std::shared_ptr<const Model> quantized;
    const std::string path = BuildQuantizedPlan("seq_cls", format, &quantized);
    fs::remove(path);
    ASSERT_EQ(quantized->quantized->check_reference.outputs.size(),
              quantized->quantized->check_outputs.outputs.size());
    auto engine = CreateCpuEngine(quantized, {1});
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto run = [&](float quantizer_shift, float reference_shift) {
      auto moved = std::make_shared<QuantizedWeights>(*quantized->quantized);
      // The engine's own answers, the stored ones shifted from them.
      const std::vector<float>& own = quantized->quantized->check_outputs.outputs[0].data;
      moved->check_outputs.outputs[0].data = own;
      for (float& v : moved->check_outputs.outputs[0].data) v += quantizer_shift;
      moved->check_reference.outputs[0].data = own;
      for (float& v : moved->check_reference.outputs[0].data) v += reference_shift;
      Model other = *quantized;
      other.quantized = moved;
      return CheckQuantizedReproduced(other, **engine);
    };
    // The quantizing engine 1.0 from fp32, this engine 0.5: within the error.
    auto close = run(0.5f, -0.5f);
    ASSERT_TRUE(close.ok()) << close.status().ToString();
    ASSERT_TRUE(close->ours_vs_fp32.has_value()) << "beyond bf16's thresholds of the quantizer's";
    EXPECT_NE(close->Describe().find(
                  "as close to the fp32 model's answers as the quantizing engine's"),
              std::string::npos)
        << close->Describe();
    // The quantizing engine 0.01 from fp32, this engine 0.51: a GEMM gone wrong.
    auto far = run(0.5f, 0.51f);
    ASSERT_FALSE(far.ok());
    EXPECT_EQ(far.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(far.status().message().find("against fp32"), std::string::npos)
        << far.status().message();
  }
}

// Hostile 8-bit plans: the reader checks the 8-bit metadata and sections.
class HostileInt8Plan : public HostilePlan {
 protected:
  void SetUp() override {
    std::shared_ptr<const Model> quantized;
    const std::string path = BuildQuantizedPlan("seq_cls", format_, &quantized);
    bytes_ = ReadAll(path);
    fs::remove(path);
    weight_ = quantized->quantized->linears.begin()->first;
  }
  // Overwrites a tensor section's bytes with `value`'s, repeated.
  template <class T>
  void Fill(const std::string& name, T value) {
    const size_t i = Find(name);
    plan::Entry e = plan::DecodeEntry(entry(i));
    for (size_t off = 0; off + sizeof(T) <= e.length; off += sizeof(T))
      std::memcpy(at(e.offset + off), &value, sizeof(T));
    ResealSection(i);
  }
  std::string weight_;  // an 8-bit Linear's weight section
  QuantFormat format_ = QuantFormat::kInt8;
};

class HostileFp8Plan : public HostileInt8Plan {
 protected:
  void SetUp() override {
    format_ = QuantFormat::kFp8;
    HostileInt8Plan::SetUp();
  }
};

TEST_F(HostileFp8Plan, IntactPlanLoads) {
  auto plan = FromBytes(bytes_);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->model->quantized);
  EXPECT_EQ(plan->model->quantized->format, QuantFormat::kFp8);
}

// E4M3's NaN codes (S.1111.111) in the weights.
TEST_F(HostileFp8Plan, NaNWeights) {
  Fill(weight_, uint8_t{0xff});
  ExpectError("hold NaN");
}

// fp8 inputs always have a calibrated scale (int8's 0 means per token).
TEST_F(HostileFp8Plan, ZeroInputScale) {
  nlohmann::json meta = Meta();
  meta["fp8"]["linears"][weight_] = 0.0;
  SetMeta(meta.dump());
  ExpectError("an input scale in (0, 1e30]");
}

// An fp8 Linear has one weight scale.
TEST_F(HostileFp8Plan, ScalesOfAnInt8Shape) {
  nlohmann::json meta = Meta();
  meta["precision"] = "int8";
  meta["int8"] = meta["fp8"];
  meta.erase("fp8");
  meta["source"] = "x";  // room for the longer name in the metadata's section
  SetMeta(meta.dump());
  ExpectError("expected I8");
}

// fp8's check carries the fp32 model's answers.
TEST_F(HostileFp8Plan, CheckWithoutItsFp32Answers) {
  nlohmann::json meta = Meta();
  meta["fp8"]["check"].erase("reference");
  SetMeta(meta.dump());
  ExpectError("\"fp8.check.reference\" is missing");
}

TEST_F(HostileInt8Plan, IntactPlanLoads) {
  auto plan = FromBytes(bytes_);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->model->quantized);
}

TEST_F(HostileInt8Plan, MetadataWithoutItsInt8Object) {
  nlohmann::json meta = Meta();
  meta.erase("int8");
  SetMeta(meta.dump());
  ExpectError("no int8 report");
}

TEST_F(HostileInt8Plan, Int8LinearThatIsNotAnEncoderLinear) {
  nlohmann::json meta = Meta();
  const nlohmann::json scale = meta["int8"]["linears"][weight_];
  meta["int8"]["linears"].erase(weight_);
  meta["int8"]["linears"]["classifier_w"] = scale;
  SetMeta(meta.dump());
  ExpectError("is not an encoder Linear's weight");
}

TEST_F(HostileInt8Plan, ReportWithWrongTypesOrRanges) {
  nlohmann::json meta = Meta();
  meta["int8"]["report"]["outputs"][0]["cosine_min"] = 7;
  SetMeta(meta.dump());
  ExpectError("cosine_min");
  meta = Meta();
  meta["int8"]["report"]["kept_fp32"] = "none";
  SetMeta(meta.dump());
  ExpectError("kept_fp32");
}

TEST_F(HostileInt8Plan, NonPositiveScales) {
  Fill(plan::ScalesSection(weight_), 0.0f);
  ExpectError("not all positive");
}

TEST_F(HostileInt8Plan, CheckBatchThatIsNotItsSequences) {
  Fill(plan::CheckSection(QuantFormat::kInt8, "cu_seqlens"), int32_t{3});
  ExpectError("cu_seqlens");
}

TEST_F(HostileInt8Plan, CheckSizesThatDisagreeWithTheSections) {
  nlohmann::json meta = Meta();
  meta["int8"]["check"]["tokens"] = meta["int8"]["check"]["tokens"].get<int>() + 1;
  SetMeta(meta.dump());
  ExpectError("int8_check.input_ids");
}

TEST(Plan, IsPlanFileAndLoadModelAndTokenizerRouteByMagic) {
  const std::string path = BuildPlan("qa");
  EXPECT_TRUE(IsPlanFile(path));
  EXPECT_FALSE(IsPlanFile(ModelDir("qa")));
  EXPECT_FALSE(IsPlanFile(ModelDir("qa") + "/config.json"));
  auto loaded = LoadModelAndTokenizer(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->model->source, path);
  auto info = ReadPlanInfo(path);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->source, ModelDir("qa"));
  EXPECT_EQ(info->tokenizer_kind, "vocab");
  fs::remove(path);
}

// The GEMM tuning cache travels in the plan as written; a plan without one
// says so with an empty list, a Hugging Face directory with none at all.
TEST(Plan, CarriesItsGemmChoices) {
  const std::string with = BuildPlan("token_cls", Precision::kFp16, kChoices);
  auto plan = ReadPlan(with);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->model->gemm_choices.has_value());
  EXPECT_EQ(*plan->model->gemm_choices, kChoices);
  EXPECT_EQ(plan->info.gemm_choices, 2u);
  auto info = ReadPlanInfo(with);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->gemm_choices, 2u);
  fs::remove(with);

  const std::string without = BuildPlan("token_cls", Precision::kFp16);
  plan = ReadPlan(without);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->model->gemm_choices.has_value());
  EXPECT_TRUE(plan->model->gemm_choices->empty());
  fs::remove(without);

  auto dir = LoadModelAndTokenizer(ModelDir("token_cls"));
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_FALSE(dir->model->gemm_choices.has_value());
}

// A plan's bytes are untrusted: a NaN or infinity in a weight (written by a
// build that did not check, or damaged consistently with its checksums) is
// refused at load, naming the tensor, in every stored precision.
TEST(Plan, NonFiniteWeightsAreRefused) {
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    auto loaded = LoadModelAndTokenizer(ModelDir("seq_cls"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    auto tok = ReadTokenizerSource(ModelDir("seq_cls"));
    ASSERT_TRUE(tok.ok());
    Model poisoned = *loaded->model;
    std::vector<float> values(poisoned.weights.layers[1].ffn_out_w.f32(),
                              poisoned.weights.layers[1].ffn_out_w.f32() +
                                  poisoned.weights.layers[1].ffn_out_w.numel());
    values[7] = std::numeric_limits<float>::infinity();
    auto owner = std::make_shared<std::vector<float>>(std::move(values));
    poisoned.weights.layers[1].ffn_out_w =
        Tensor(DType::kF32, poisoned.weights.layers[1].ffn_out_w.shape(), owner->data(), owner);
    PlanBuildOptions options;
    options.precision = p;
    const std::string path = TempPath(std::string("nonfinite_") + PrecisionName(p));
    ASSERT_TRUE(WritePlan(poisoned, *tok, options, "crc32c:test", path).ok());
    auto plan = ReadPlan(path);
    fs::remove(path);
    ASSERT_FALSE(plan.ok()) << PrecisionName(p);
    EXPECT_EQ(plan.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(plan.status().message().find("tensor layers.1.ffn_out_w"), std::string::npos)
        << plan.status().message();
    EXPECT_NE(plan.status().message().find("holds 1 NaN or infinite value"), std::string::npos)
        << plan.status().message();
  }
}

TEST(Plan, Crc32cKnownValue) {
  // The CRC32C check value of "123456789" (RFC 3720).
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
}

}  // namespace
}  // namespace bertrt

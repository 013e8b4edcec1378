// The importer on broken or unsupported directories, built from the tiny
// models in a temp dir: every failure is a clean Status with a useful message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "bertrt/importer.h"
#include "bertrt/safetensors.h"
#include "importer_test_util.h"

namespace bertrt {
namespace {

using importer_test::Load;
using importer_test::Loaded;
using importer_test::ModelDir;

namespace fs = std::filesystem;

struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::vector<RawTensor> ReadTensors(const std::string& path) {
  auto f = SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  std::vector<RawTensor> out;
  for (const SafetensorsEntry& e : f->entries()) {
    const Tensor t = f->View(e);
    out.push_back({e.name, DTypeName(e.dtype), e.shape,
                   std::string(static_cast<const char*>(t.raw()), t.nbytes())});
  }
  return out;
}

void WriteTensors(const std::string& path, const std::vector<RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  const std::string h = header.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << len << h << data;
}

class BrokenModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("bertrt_imp_") + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Copies tests/data/models/<name> into the temp dir and returns its path.
  std::string CopyModel(const std::string& name) {
    fs::copy(ModelDir(name), dir_, fs::copy_options::recursive);
    return dir_.string();
  }
  void EditTensors(const std::function<void(std::vector<RawTensor>&)>& edit) {
    const std::string path = (dir_ / "model.safetensors").string();
    std::vector<RawTensor> t = ReadTensors(path);
    edit(t);
    WriteTensors(path, t);
  }
  void EditConfig(const std::function<void(nlohmann::json&)>& edit,
                  const std::string& file = "config.json") {
    const std::string path = (dir_ / file).string();
    nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
    edit(j);
    std::ofstream(path) << j.dump(2);
  }
  // Loads and expects failure with `code` and every needle in the message.
  std::string ExpectFailure(StatusCode code, std::initializer_list<const char*> needles) {
    auto l = Load(dir_.string());
    EXPECT_FALSE(l.model.ok());
    if (l.model.ok()) return "";
    const std::string msg = l.model.status().message();
    EXPECT_EQ(l.model.status().code(), code) << l.model.status().ToString();
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
    return msg;
  }

  fs::path dir_;
};

TEST_F(BrokenModelTest, MissingTensorNamesItAndNeighbours) {
  CopyModel("seq_cls");
  EditTensors([](auto& t) {
    std::erase_if(t, [](const RawTensor& r) {
      return r.name == "bert.encoder.layer.1.output.dense.weight";
    });
  });
  ExpectFailure(StatusCode::kNotFound,
                {"missing tensor bert.encoder.layer.1.output.dense.weight [32, 37]", "tried",
                 "closest names present", "bert.encoder.layer.0.output.dense.weight"});
}

TEST_F(BrokenModelTest, MisShapedTensor) {
  CopyModel("seq_cls");
  EditTensors([](auto& t) {
    for (RawTensor& r : t)
      if (r.name == "bert.encoder.layer.1.intermediate.dense.weight") {
        r.shape = {37, 16};
        r.bytes.resize(37 * 16 * 4);
      }
  });
  ExpectFailure(StatusCode::kInvalidArgument,
                {"bert.encoder.layer.1.intermediate.dense.weight: expected [37, 32], found "
                 "[37, 16] in model.safetensors"});
}

TEST_F(BrokenModelTest, SequenceClassificationNeedsThePooler) {
  CopyModel("seq_cls");
  EditTensors([](auto& t) {
    std::erase_if(t, [](const RawTensor& r) { return r.name.find("pooler") != std::string::npos; });
  });
  ExpectFailure(StatusCode::kNotFound, {"bert.pooler.dense.weight", "pooler"});
}

TEST_F(BrokenModelTest, GammaBetaLayerNormNamesAccepted) {
  CopyModel("seq_cls");
  EditTensors([](auto& t) {
    for (RawTensor& r : t) {
      if (r.name.find("LayerNorm.weight") != std::string::npos)
        r.name.replace(r.name.size() - 6, 6, "gamma");
      else if (r.name.find("LayerNorm.bias") != std::string::npos)
        r.name.replace(r.name.size() - 4, 4, "beta");
    }
  });
  auto l = Load(dir_.string());
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  EXPECT_FALSE((*l.model)->weights.layers[1].ffn_ln_gamma.empty());
}

TEST_F(BrokenModelTest, ClassifierDisagreeingWithLabels) {
  CopyModel("seq_cls");
  EditConfig([](nlohmann::json& j) {
    j["id2label"] = {{"0", "NEG"}, {"1", "POS"}};
    j.erase("label2id");
  });
  ExpectFailure(StatusCode::kInvalidArgument, {"classifier.weight: expected [2, 32], found [3, 32]"});
}

TEST_F(BrokenModelTest, NumLabelsWithoutId2Label) {
  CopyModel("seq_cls");
  EditConfig([](nlohmann::json& j) {
    j.erase("id2label");
    j.erase("label2id");
    j["num_labels"] = 3;
  });
  auto l = Load(dir_.string());
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  EXPECT_EQ((*l.model)->config.labels, (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
}

TEST_F(BrokenModelTest, PytorchBinThatIsNoCheckpointSaysSo) {
  CopyModel("seq_cls");
  fs::remove(dir_ / "model.safetensors");
  std::ofstream(dir_ / "pytorch_model.bin") << "not really";
  ExpectFailure(StatusCode::kDataLoss, {"pytorch_model.bin", "is this a PyTorch checkpoint?"});
}

TEST_F(BrokenModelTest, OnnxThatDoesNotParseSaysSo) {
  CopyModel("seq_cls");
  fs::remove(dir_ / "model.safetensors");
  std::ofstream(dir_ / "model.onnx") << "x";
  ExpectFailure(StatusCode::kDataLoss, {"model.onnx", "not an ONNX model"});
}

TEST_F(BrokenModelTest, DamagedTfCheckpointIndexSaysSo) {
  CopyModel("seq_cls");
  fs::remove(dir_ / "model.safetensors");
  std::ofstream(dir_ / "model.ckpt-1000.index") << "x";
  ExpectFailure(StatusCode::kDataLoss, {"model.ckpt-1000.index", "too short"});
}

TEST_F(BrokenModelTest, TfOnlyExplainsConversion) {
  CopyModel("seq_cls");
  fs::remove(dir_ / "model.safetensors");
  std::ofstream(dir_ / "tf_model.h5") << "x";
  ExpectFailure(StatusCode::kNotFound, {"tf_model.h5", "from_tf=True"});
}

TEST_F(BrokenModelTest, NoWeightsAtAll) {
  CopyModel("seq_cls");
  fs::remove(dir_ / "model.safetensors");
  ExpectFailure(StatusCode::kNotFound, {"no model.safetensors"});
}

TEST_F(BrokenModelTest, BertWeightsUnderARobertaConfigSayWhereTheyWereLookedFor) {
  CopyModel("seq_cls");
  EditConfig([](nlohmann::json& j) {
    j["model_type"] = "roberta";
    j["architectures"] = {"RobertaForSequenceClassification"};
  });
  ExpectFailure(StatusCode::kNotFound, {"roberta.embeddings.word_embeddings.weight", "RoBERTa",
                                        "closest names present: bert.embeddings"});
}

TEST_F(BrokenModelTest, FamilyWithoutSupportRejectedWithReason) {
  CopyModel("base");
  EditConfig([](nlohmann::json& j) { j["model_type"] = "deberta-v2"; });
  ExpectFailure(StatusCode::kUnimplemented,
                {"\"deberta-v2\"", "disentangled", "\"xlm-roberta\"", "\"distilbert\""});
}

TEST_F(BrokenModelTest, BertWeightsUnderAnotherFamilysConfigNameWhatIsMissing) {
  CopyModel("base");
  EditConfig([](nlohmann::json& j) {
    j["model_type"] = "distilbert";
    j.update({{"dim", 32}, {"n_layers", 2}, {"n_heads", 4}, {"hidden_dim", 37}});
  });
  ExpectFailure(StatusCode::kNotFound, {"transformer.layer.0.attention.q_lin.weight",
                                        "closest names present"});
}

TEST_F(BrokenModelTest, UnknownActivationRejected) {
  CopyModel("base");
  EditConfig([](nlohmann::json& j) { j["hidden_act"] = "swish"; });
  ExpectFailure(StatusCode::kUnimplemented, {"hidden_act \"swish\""});
}

TEST_F(BrokenModelTest, RelativePositionsRejected) {
  CopyModel("base");
  EditConfig([](nlohmann::json& j) { j["position_embedding_type"] = "relative_key"; });
  ExpectFailure(StatusCode::kUnimplemented, {"relative_key"});
}

TEST_F(BrokenModelTest, HeadsMustDivideHidden) {
  CopyModel("base");
  EditConfig([](nlohmann::json& j) { j["num_attention_heads"] = 5; });
  ExpectFailure(StatusCode::kInvalidArgument, {"not a multiple of num_attention_heads 5"});
}

TEST_F(BrokenModelTest, ConfigWithWrongTypes) {
  CopyModel("base");
  EditConfig([](nlohmann::json& j) { j["hidden_size"] = "32"; });
  ExpectFailure(StatusCode::kInvalidArgument, {"hidden_size", "integer"});
}

TEST_F(BrokenModelTest, MoreLayersInCheckpointThanConfig) {
  CopyModel("base");
  EditConfig([](nlohmann::json& j) { j["num_hidden_layers"] = 1; });
  ExpectFailure(StatusCode::kInvalidArgument, {"encoder.layer.1.", "num_hidden_layers = 1"});
}

TEST_F(BrokenModelTest, PretrainingHeadLoadsAsBaseWithNotice) {
  CopyModel("base_prefixed");
  EditConfig([](nlohmann::json& j) { j["architectures"] = {"BertForPreTraining"}; });
  auto l = Load(dir_.string());
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  EXPECT_EQ((*l.model)->config.head, HeadKind::kBase);
  ASSERT_FALSE(l.notices.empty());
  EXPECT_NE(l.notices[0].find("BertForPreTraining"), std::string::npos);
}

// A ...ForMaskedLM is served as SPLADE, which reads the masked-LM head: a
// checkpoint saved without it says so instead of loading something else.
TEST_F(BrokenModelTest, MaskedLmWithoutItsHeadIsRefused) {
  CopyModel("base_prefixed");
  EditConfig([](nlohmann::json& j) { j["architectures"] = {"BertForMaskedLM"}; });
  ExpectFailure(StatusCode::kNotFound, {"missing tensor cls.predictions.transform.dense.weight",
                                        "SPLADE (a ...ForMaskedLM architecture)"});
}

// sentence-transformers 2.x-4.x: booleans, concatenated in its fixed order
// (cls, max, mean, mean_sqrt_len, weightedmean, lasttoken), not the file's.
TEST_F(BrokenModelTest, LegacyPoolingBooleansConcatenateInOrder) {
  CopyModel("sentence_mean");
  EditConfig([](nlohmann::json& j) {
    j["pooling_mode_lasttoken"] = true;
    j["pooling_mode_cls_token"] = true;
  }, "1_Pooling/config.json");
  auto l = Load(dir_.string());
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  EXPECT_EQ((*l.model)->config.pooling_modes,
            (std::vector<Pooling>{Pooling::kCls, Pooling::kMean, Pooling::kLastToken}));
  EXPECT_EQ((*l.model)->config.embedding_width(), 3 * (*l.model)->config.hidden_size);
}

// sentence-transformers 5+: "pooling_mode" as a name or a list, and
// "embedding_dimension" for "word_embedding_dimension".
TEST_F(BrokenModelTest, PoolingModeNameAndList) {
  CopyModel("sentence_mean");
  int hidden = 0;
  EditConfig([&](nlohmann::json& j) { hidden = j["word_embedding_dimension"]; },
             "1_Pooling/config.json");
  for (const nlohmann::json& mode :
       {nlohmann::json("mean_sqrt_len_tokens"), nlohmann::json({"weightedmean", "max"})}) {
    EditConfig([&](nlohmann::json& j) {
      j = {{"embedding_dimension", hidden}, {"pooling_mode", mode}, {"include_prompt", true}};
    }, "1_Pooling/config.json");
    auto l = Load(dir_.string());
    ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
    const std::vector<Pooling> want =
        mode.is_string() ? std::vector<Pooling>{Pooling::kMeanSqrtLen}
                         : std::vector<Pooling>{Pooling::kWeightedMean, Pooling::kMax};
    EXPECT_EQ((*l.model)->config.pooling_modes, want);
  }
}

TEST_F(BrokenModelTest, UnknownPoolingModeRejected) {
  CopyModel("sentence_mean");
  EditConfig([](nlohmann::json& j) { j = {{"pooling_mode", "median"}}; },
             "1_Pooling/config.json");
  ExpectFailure(StatusCode::kInvalidArgument, {"\"median\"", "weightedmean"});
}

TEST_F(BrokenModelTest, IncludePromptRead) {
  CopyModel("sentence_mean");
  EditConfig([](nlohmann::json& j) { j["include_prompt"] = false; }, "1_Pooling/config.json");
  auto l = Load(dir_.string());
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  EXPECT_FALSE((*l.model)->config.include_prompt);
  EditConfig([](nlohmann::json& j) { j["include_prompt"] = "no"; }, "1_Pooling/config.json");
  ExpectFailure(StatusCode::kInvalidArgument, {"include_prompt"});
}

TEST_F(BrokenModelTest, PromptsAndTruncateDim) {
  CopyModel("sentence_mean");
  const fs::path settings = dir_ / "config_sentence_transformers.json";
  std::ofstream(settings) << R"({"prompts": {"query": "query: ", "passage": "passage: "},
                                "default_prompt_name": "query", "truncate_dim": 8})";
  auto l = Load(dir_.string());
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  const ModelConfig& c = (*l.model)->config;
  EXPECT_EQ(c.default_prompt_name, "query");
  EXPECT_EQ(c.truncate_dim, 8);
  EXPECT_EQ(c.embedding_width(), 8);
  ASSERT_TRUE(c.PromptText("passage").ok());
  EXPECT_EQ(*c.PromptText("passage"), "passage: ");
  EXPECT_EQ(*c.PromptText(std::nullopt), "query: ");  // the default
  const std::string unknown = c.PromptText("doc").status().message();
  EXPECT_NE(unknown.find("\"doc\""), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("\"passage\", \"query\""), std::string::npos) << unknown;
  std::ofstream(settings) << R"({"prompts": {"query": "q: "}, "default_prompt_name": "doc"})";
  ExpectFailure(StatusCode::kInvalidArgument, {"default_prompt_name \"doc\""});
  std::ofstream(settings) << R"({"truncate_dim": 100000})";
  ExpectFailure(StatusCode::kInvalidArgument, {"truncate_dim 100000"});
}

TEST_F(BrokenModelTest, DenseModuleChecked) {
  CopyModel("sentence_mean");
  int hidden = 0;
  EditConfig([&](nlohmann::json& j) { hidden = j["word_embedding_dimension"]; },
             "1_Pooling/config.json");
  // Between Pooling and Normalize, where sentence-transformers puts it.
  EditConfig([](nlohmann::json& j) {
    const nlohmann::json dense_module = {{"idx", 2},
                                         {"name", "2"},
                                         {"path", "2_Dense"},
                                         {"type", "sentence_transformers.models.Dense"}};
    j.insert(j.begin() + 2, dense_module);
  }, "modules.json");
  fs::create_directory(dir_ / "2_Dense");
  auto dense = [&](const nlohmann::json& j) { std::ofstream(dir_ / "2_Dense/config.json") << j; };
  dense({{"in_features", hidden + 1}, {"out_features", 4}});
  const std::string wrong_width = "in_features " + std::to_string(hidden + 1);
  ExpectFailure(StatusCode::kInvalidArgument, {wrong_width.c_str()});
  dense({{"in_features", hidden}, {"out_features", 4},
         {"activation_function", "my_package.Swish"}});
  ExpectFailure(StatusCode::kUnimplemented, {"my_package.Swish"});
  // The config is right; its weights are missing.
  dense({{"in_features", hidden}, {"out_features", 4},
         {"activation_function", "torch.nn.modules.linear.Identity"}});
  ExpectFailure(StatusCode::kNotFound, {"2_Dense"});
  // After Normalize: not an order bertrt computes.
  EditConfig([](nlohmann::json& j) { std::swap(j[2], j[3]); }, "modules.json");
  ExpectFailure(StatusCode::kUnimplemented, {"Dense module out of place"});
}

TEST_F(BrokenModelTest, TransformerModuleInSubfolder) {
  // sentence-transformers layouts with the transformer in 0_Transformer/.
  CopyModel("sentence_cls");
  fs::create_directory(dir_ / "0_Transformer");
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                        "sentence_bert_config.json"})
    fs::rename(dir_ / f, dir_ / "0_Transformer" / f);
  EditConfig([](nlohmann::json& j) {
    j[0]["path"] = "0_Transformer";
    j[0]["type"] = "sentence_transformers.base.modules.transformer.Transformer";
  }, "modules.json");
  auto l = Load(dir_.string());
  ASSERT_TRUE(l.model.ok()) << l.model.status().ToString();
  EXPECT_EQ((*l.model)->config.head, HeadKind::kSentenceEmbedding);
  EXPECT_EQ((*l.model)->config.pooling_modes, std::vector<Pooling>{Pooling::kCls});
}

TEST_F(BrokenModelTest, ModulePathOutsideDirectoryRejected) {
  CopyModel("sentence_cls");
  EditConfig([](nlohmann::json& j) { j[1]["path"] = "../../etc"; }, "modules.json");
  ExpectFailure(StatusCode::kInvalidArgument, {"leaves the model directory"});
}

TEST_F(BrokenModelTest, ShardIndexNamingAMissingShard) {
  CopyModel("sharded");
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  ExpectFailure(StatusCode::kNotFound, {"model-00002-of-00002.safetensors"});
}

TEST_F(BrokenModelTest, ShardIndexWithPathTraversal) {
  CopyModel("sharded");
  EditConfig([](nlohmann::json& j) {
    j["weight_map"]["bert.pooler.dense.bias"] = "../model-00001-of-00002.safetensors";
  }, "model.safetensors.index.json");
  ExpectFailure(StatusCode::kDataLoss, {"not a plain file name"});
}

TEST_F(BrokenModelTest, CorruptSafetensorsNamesTheFile) {
  CopyModel("base");
  std::ofstream(dir_ / "model.safetensors", std::ios::binary) << std::string(8, '\xff') << "{";
  ExpectFailure(StatusCode::kDataLoss, {"model.safetensors", "header length"});
}

TEST_F(BrokenModelTest, IntegerWeightRejected) {
  CopyModel("base");
  EditTensors([](auto& t) {
    for (RawTensor& r : t)
      if (r.name == "embeddings.LayerNorm.bias") r.dtype = "I32";
  });
  ExpectFailure(StatusCode::kInvalidArgument, {"embeddings.LayerNorm.bias", "I32"});
}

}  // namespace
}  // namespace bertrt

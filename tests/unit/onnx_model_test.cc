// ONNX exports (scripts/make_onnx_models.py): every weight of the source model
// found again under its transformers name with the same bytes, whichever
// exporter renamed it; int8 weights dequantized to within half a step of the
// source; files cut short are errors.
#include "checkpoint/onnx_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "bertrt/importer.h"
#include "core/files.h"
#include "checkpoint/checkpoint.h"
#include "importer/hf_config.h"
#include "core/json_util.h"
#include "importer_test_util.h"
#include "onnx_model.pb.h"

namespace bertrt::checkpoint {
namespace {

using importer_test::ExpectSameTensors;
using importer_test::ModelDir;

TEST(OnnxModel, EveryExporterGivesTheSourceWeightsBack) {
  EXPECT_GT(ExpectSameTensors("onnx_seq_cls", "seq_cls", "ONNX (model.onnx)"), 30u);
  EXPECT_GT(ExpectSameTensors("onnx_token_cls", "token_cls", "ONNX (model.onnx)"), 30u);
  EXPECT_GT(ExpectSameTensors("onnx_dynamo_qa", "qa", "ONNX (model.onnx)"), 30u);
  EXPECT_GT(ExpectSameTensors("onnx_distilbert_seq_cls", "distilbert_seq_cls", "ONNX (model.onnx)"), 30u);
  EXPECT_GT(ExpectSameTensors("onnx_optimum_roberta_seq_cls", "roberta_seq_cls", "ONNX (model.onnx)"), 30u);
}

TEST(OnnxModel, Int8WeightsDequantizeToWithinHalfAStep) {
  auto got = Checkpoint::Open(ModelDir("onnx_int8_seq_cls"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto want = Checkpoint::Open(ModelDir("seq_cls"));
  ASSERT_TRUE(want.ok());
  const std::string name = "bert.encoder.layer.1.intermediate.dense.weight";
  const CheckpointTensor* g = got->Find(name);
  const CheckpointTensor* w = want->Find(name);
  ASSERT_TRUE(g && w);
  ASSERT_EQ(g->data.shape(), w->data.shape());
  // Symmetric int8 over the tensor's range: one step is max|w| / 127.
  float max_abs = 0;
  for (int64_t i = 0; i < w->data.numel(); ++i) max_abs = std::max(max_abs, std::fabs(w->data.f32()[i]));
  const float step = max_abs / 127.0f;
  for (int64_t i = 0; i < w->data.numel(); ++i)
    ASSERT_LE(std::fabs(g->data.f32()[i] - w->data.f32()[i]), 0.51f * step + 1e-7f) << i;
}

TEST(OnnxModel, FilesCutShortAreErrorsNotCrashes) {
  auto file = ReadRegularFileIntoMemory(ModelDir("onnx_int8_seq_cls") + "/model.onnx");
  ASSERT_TRUE(file.ok());
  const std::string_view bytes = file->bytes;
  for (size_t n = 0; n < bytes.size(); n += 1499) {
    auto got = ParseOnnxModel(bytes.substr(0, n), "", "cut");
    // A cut at a field boundary can parse; it then lacks the weights after it.
    if (got.ok()) EXPECT_LT(got->tensors.size(), 40u) << n;
  }
}

// A MatMul whose weight is the output of a Transpose node that has no input
// (the ONNX fuzzer's find: the reader indexed the Transpose's first input
// unchecked, a read through a null pointer): the file is read as far as it
// makes sense: the initializer comes back as it is in the file.
TEST(OnnxModel, ANodeWithoutItsInputsIsReadWithoutCrashing) {
  onnx::Model model;
  onnx::Graph* g = model.mutable_graph();
  onnx::Tensor* w = g->add_initializer();
  w->set_name("dense.weight");
  w->set_data_type(1);  // float
  w->add_dims(2);
  w->add_dims(2);
  for (int i = 0; i < 4; ++i) w->add_float_data(static_cast<float>(i + 1));
  onnx::Node* transpose = g->add_node();
  transpose->set_op_type("Transpose");
  transpose->add_output("dense.weight_t");
  onnx::Node* matmul = g->add_node();
  matmul->set_op_type("MatMul");
  matmul->add_input("x");
  matmul->add_input("dense.weight_t");
  matmul->add_output("y");
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  auto got = ParseOnnxModel(bytes, "", "crafted.onnx");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->tensors.size(), 1u);
  const Tensor& t = got->tensors[0].data;
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<float>(t.f32(), t.f32() + 4), (std::vector<float>{1, 2, 3, 4}));
}

// What the graph implies is what the exporter's config.json said: sizes,
// head width (from the Q/K/V Reshape), activation (Erf / GELU's tanh form /
// Relu), LayerNorm epsilon (an attribute, or the constant of a decomposed
// one), the head and its outputs.
TEST(OnnxModel, TheGraphImpliesTheExportedConfig) {
  for (const char* name : {"onnx_seq_cls", "onnx_token_cls", "onnx_dynamo_qa", "onnx_int8_seq_cls",
                           "onnx_external_sentence", "onnx_distilbert_seq_cls",
                           "onnx_optimum_roberta_seq_cls"}) {
    SCOPED_TRACE(name);
    auto ckpt = Checkpoint::Open(ModelDir(name));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    const ImpliedConfig& implied = ckpt->implied_config();
    ASSERT_FALSE(implied.config.is_null()) << implied.gap;
    auto got = importer::ParseModelConfig(implied.config, "graph", nullptr);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto json = ReadJsonFile(ModelDir(name) + "/config.json");
    ASSERT_TRUE(json.ok());
    auto want = importer::ParseModelConfig(*json, "config.json", nullptr);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(got->model_type, want->model_type);
    EXPECT_EQ(got->hidden_size, want->hidden_size);
    EXPECT_EQ(got->num_layers, want->num_layers);
    EXPECT_EQ(got->num_heads, want->num_heads);
    EXPECT_EQ(got->intermediate_size, want->intermediate_size);
    EXPECT_EQ(got->vocab_size, want->vocab_size);
    EXPECT_EQ(got->max_position_embeddings, want->max_position_embeddings);
    EXPECT_EQ(got->type_vocab_size, want->type_vocab_size);
    EXPECT_EQ(got->hidden_act, want->hidden_act);
    EXPECT_EQ(got->layer_norm_eps, want->layer_norm_eps);
    EXPECT_EQ(got->num_labels, want->num_labels);
    // onnx_external_sentence is a sentence-transformers model's encoder
    // alone: its graph is a BertModel's (modules.json adds the pooling).
    if (std::string(name) != "onnx_external_sentence") EXPECT_EQ(got->head, want->head);
  }
}

// The files a checkpoint was read from (the plan's source checksum): the
// ONNX model with its external data; a TensorFlow index with its shard.
TEST(OnnxModel, FilesReadAreTheModelAndItsExternalData) {
  auto ckpt = Checkpoint::Open(ModelDir("onnx_external_sentence"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  ASSERT_EQ(ckpt->files().size(), 2u);
  EXPECT_EQ(ckpt->files()[0], ModelDir("onnx_external_sentence") + "/model.onnx");
  EXPECT_EQ(ckpt->files()[1].substr(ckpt->files()[1].rfind('/') + 1), "model.onnx.data");
  auto tf = Checkpoint::Open(ModelDir("tf_seq_cls"));
  ASSERT_TRUE(tf.ok());
  EXPECT_EQ(tf->files(), (std::vector<std::string>{
                             ModelDir("tf_seq_cls") + "/model.ckpt-1000.index",
                             ModelDir("tf_seq_cls") + "/model.ckpt-1000.data-00000-of-00001"}));
}

TEST(ModelSource, AWeightsFileNamesItsFolderAndItself) {
  const std::string tf = ModelDir("tf_seq_cls");
  for (const std::string& path : {tf + "/model.ckpt-1000", tf + "/model.ckpt-1000.index",
                                  tf + "/model.ckpt-1000.data-00000-of-00001"}) {
    auto s = ResolveModelSource(path);
    ASSERT_TRUE(s.ok()) << path << ": " << s.status().ToString();
    EXPECT_EQ(s->dir, tf);
    EXPECT_EQ(s->weights, tf + "/model.ckpt-1000");
  }
  auto onnx = ResolveModelSource(ModelDir("onnx_seq_cls") + "/model.onnx");
  ASSERT_TRUE(onnx.ok());
  EXPECT_EQ(onnx->dir, ModelDir("onnx_seq_cls"));
  auto dir = ResolveModelSource(tf);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->dir, tf);
  EXPECT_TRUE(dir->weights.empty());
  EXPECT_EQ(ResolveModelSource(tf + "/model.ckpt-7").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ResolveModelSource(tf + "/vocab.txt").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bertrt::checkpoint

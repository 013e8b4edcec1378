// ONNX exports (scripts/make_onnx_models.py): every weight of the source model
// found again under its transformers name with the same bytes, whichever
// exporter renamed it; int8 weights dequantized to within half a step of the
// source; files cut short are errors.
#include "importer/onnx_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/files.h"
#include "importer/checkpoint.h"
#include "importer_test_util.h"

namespace bertrt::importer {
namespace {

using importer_test::ExpectSameTensors;
using importer_test::ModelDir;

TEST(OnnxModel, EveryExporterGivesTheSourceWeightsBack) {
  EXPECT_GT(ExpectSameTensors("onnx_seq_cls", "seq_cls", "ONNX (model.onnx)"), 30u);
  EXPECT_GT(ExpectSameTensors("onnx_token_cls", "token_cls", "ONNX (model.onnx)"), 30u);
  EXPECT_GT(ExpectSameTensors("onnx_dynamo_qa", "qa", "ONNX (model.onnx)"), 30u);
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

}  // namespace
}  // namespace bertrt::importer

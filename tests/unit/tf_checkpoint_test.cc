// TensorFlow 1 checkpoints: the fixtures tf.compat.v1.train.Saver wrote
// (scripts/make_tf_checkpoints.py) read back under transformers' names, equal
// to the safetensors models they came from; damaged indexes and shards are
// errors that say what is wrong.
#include "checkpoint/tf_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/files.h"
#include "checkpoint/checkpoint.h"
#include "importer_test_util.h"

namespace bertrt::checkpoint {
namespace {

namespace fs = std::filesystem;
using importer_test::ExpectSameTensors;
using importer_test::ModelDir;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(TfCheckpoint, VariablesComeBackUnderTransformersNamesEqualToTheSource) {
  EXPECT_GT(ExpectSameTensors("tf_seq_cls", "sharded", "TensorFlow checkpoint (model.ckpt-1000)"), 30u);
  EXPECT_GT(ExpectSameTensors("tf_squad", "qa", "TensorFlow checkpoint (model.ckpt-88)"), 30u);
  EXPECT_GT(ExpectSameTensors("tf_ner", "token_cls", "TensorFlow checkpoint (model.ckpt-1000)"), 30u);
}

TEST(TfCheckpoint, TrainingVariablesAreNamedButNotRead) {
  auto got = Checkpoint::Open(ModelDir("tf_seq_cls"));
  ASSERT_TRUE(got.ok());
  const CheckpointTensor* slot = got->Find("bert/pooler/dense/kernel/adam_m");
  ASSERT_NE(slot, nullptr);
  EXPECT_TRUE(slot->data.empty());
  ASSERT_NE(got->Find("global_step"), nullptr);
}

TEST(TfCheckpoint, GoogleNamesMapAsTransformersMapsThem) {
  bool t = false;
  EXPECT_EQ(HfNameOfTfVariable("bert/encoder/layer_11/attention/self/query/kernel", &t),
            "bert.encoder.layer.11.attention.self.query.weight");
  EXPECT_TRUE(t);
  EXPECT_EQ(HfNameOfTfVariable("bert/encoder/layer_0/output/LayerNorm/gamma", &t),
            "bert.encoder.layer.0.output.LayerNorm.weight");
  EXPECT_FALSE(t);
  EXPECT_EQ(HfNameOfTfVariable("bert/embeddings/LayerNorm/beta", &t), "bert.embeddings.LayerNorm.bias");
  EXPECT_EQ(HfNameOfTfVariable("bert/embeddings/word_embeddings", &t),
            "bert.embeddings.word_embeddings.weight");
  EXPECT_FALSE(t);
  EXPECT_EQ(HfNameOfTfVariable("bert/pooler/dense/bias", &t), "bert.pooler.dense.bias");
  EXPECT_EQ(HfNameOfTfVariable("output_weights", &t), "classifier.weight");
  EXPECT_FALSE(t);  // [labels, hidden] already
  EXPECT_EQ(HfNameOfTfVariable("cls/squad/output_bias", &t), "qa_outputs.bias");
  EXPECT_TRUE(IsTfTrainingVariable("bert/encoder/layer_0/output/dense/kernel/adam_v"));
  EXPECT_TRUE(IsTfTrainingVariable("bert/pooler/dense/bias/Adam_1"));
  EXPECT_TRUE(IsTfTrainingVariable("global_step"));
  EXPECT_FALSE(IsTfTrainingVariable("bert/pooler/dense/bias"));
}

TEST(TfCheckpoint, EveryByteOfTheIndexIsCheckedOrHarmless) {
  const std::string index = ReadAll(ModelDir("tf_squad") + "/model.ckpt-88.index");
  ASSERT_TRUE(ReadSstable(index, "index").ok());
  // Not read: the metaindex block (the footer's first handle; TensorFlow
  // leaves it empty) and the footer's padding. Every other byte is under a
  // block CRC or is a handle or the magic number.
  const size_t footer = index.size() - 48;
  auto varint = [&](size_t* at) {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(index[(*at)++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  };
  size_t at = footer;
  const uint64_t meta_offset = varint(&at), meta_size = varint(&at);
  for (size_t i = 0; i < index.size(); ++i) {
    std::string damaged = index;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
    auto got = ReadSstable(damaged, "index");
    const bool in_meta = i >= meta_offset && i < meta_offset + meta_size + 5;
    if (i < footer && !in_meta) EXPECT_FALSE(got.ok()) << "byte " << i;
  }
  for (size_t n = 0; n < index.size(); n += 7) EXPECT_FALSE(ReadSstable(index.substr(0, n), "cut").ok());
}

class TfDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bertrt_tf_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(ModelDir("tf_squad"), dir_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TfDamageTest, AFlippedDataByteFailsItsTensorsCrc) {
  const fs::path data = dir_ / "model.ckpt-88.data-00000-of-00001";
  std::string bytes = ReadAll(data.string());
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(data, std::ios::binary) << bytes;
  auto got = Checkpoint::Open(dir_.string());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("do not match its CRC32C"), std::string::npos)
      << got.status().message();
}

TEST_F(TfDamageTest, AMissingOrShortShardIsAnError) {
  const fs::path data = dir_ / "model.ckpt-88.data-00000-of-00001";
  std::string bytes = ReadAll(data.string());
  std::ofstream(data, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto got = Checkpoint::Open(dir_.string());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("outside its data shard"), std::string::npos);
  fs::remove(data);
  got = Checkpoint::Open(dir_.string());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
}

TEST_F(TfDamageTest, TheCheckpointFileChoosesAndMustNameOneThatIsThere) {
  std::ofstream(dir_ / "checkpoint") << "model_checkpoint_path: \"gs://bucket/run/model.ckpt-5\"\n";
  auto got = Checkpoint::Open(dir_.string());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("model.ckpt-5.index is not there"), std::string::npos);
  // Named from elsewhere (another machine's path), found here by its name.
  std::ofstream(dir_ / "checkpoint") << "model_checkpoint_path: \"/train/out/model.ckpt-88\"\n";
  EXPECT_TRUE(Checkpoint::Open(dir_.string()).ok());
  // No checkpoint file and two indexes: which one is not guessed.
  fs::remove(dir_ / "checkpoint");
  fs::copy_file(dir_ / "model.ckpt-88.index", dir_ / "model.ckpt-99.index");
  got = Checkpoint::Open(dir_.string());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("2 TensorFlow checkpoints"), std::string::npos);
}

}  // namespace
}  // namespace bertrt::checkpoint

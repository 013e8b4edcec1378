// pytorch_model.bin: the fixtures torch.save wrote (scripts/make_torch_checkpoints.py)
// read back tensor for tensor equal to the safetensors models they came from,
// and pickles a state dict never holds refused by name.
#include "checkpoint/torch_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/files.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/torch_pickle.h"
#include "importer_test_util.h"

namespace bertrt::checkpoint {
namespace {

using importer_test::ExpectSameTensors;
using importer_test::ModelDir;

TEST(TorchCheckpoint, ZipFormatEqualsTheSafetensorsItCameFrom) {
  ExpectSameTensors("torch_seq_cls", "seq_cls", "pytorch_model.bin (zip)");
  ExpectSameTensors("torch_bf16", "seq_cls_bf16", "pytorch_model.bin (zip)");
}

TEST(TorchCheckpoint, LegacyFormatEqualsTheSafetensorsItCameFrom) {
  ExpectSameTensors("torch_legacy_token_cls", "token_cls", "pytorch_model.bin (legacy)");
  ExpectSameTensors("torch_f16_legacy", "seq_cls_f16", "pytorch_model.bin (legacy)");
}

TEST(TorchCheckpoint, ShardsInBothFormats) {
  ExpectSameTensors("torch_sharded", "qa", "pytorch_model.bin (legacy, zip), 3 shards");
}

TEST(TorchCheckpoint, SharedStoragesAndTransposedViews) {
  // Biases are views into one storage at offsets; 2-D weights are stored
  // transposed, with strides (1, rows): each comes out row-major.
  ExpectSameTensors("torch_views", "sentence_mean", "pytorch_model.bin (zip)");
}

// --- pickles written by hand ---------------------------------------------------

std::string Str(const std::string& s) {  // BINUNICODE
  std::string out = "X";
  const uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  return out + s;
}
std::string Int(int32_t v) {  // BININT
  std::string out = "J";
  out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

// A zip-format data.pkl of one tensor {"w": storage "0" (numel floats),
// offset, size (n,), stride (stride,)}.
std::string OneTensorPickle(int32_t numel, int32_t offset, int32_t n, int32_t stride) {
  return std::string("\x80\x02}(") + Str("w") + "ctorch._utils\n_rebuild_tensor_v2\n(" +
         "(" + Str("storage") + "ctorch\nFloatStorage\n" + Str("0") + Str("cpu") + Int(numel) +
         "tQ" + Int(offset) + "(" + Int(n) + "t(" + Int(stride) + "t\x89)tRu.";
}

Status ReadPickle(const std::string& bytes) {
  return ReadTorchStateDictPickle(bytes, "test.pkl").status();
}

TEST(TorchPickle, ReadsAHandWrittenStateDict) {
  auto dict = ReadTorchStateDictPickle(OneTensorPickle(8, 2, 3, 2), "test.pkl");
  ASSERT_TRUE(dict.ok()) << dict.status().ToString();
  ASSERT_EQ(dict->tensors.size(), 1u);
  const TorchTensorRecipe& t = dict->tensors[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.storage.key, "0");
  EXPECT_EQ(t.storage.dtype, DType::kF32);
  EXPECT_EQ(t.storage.numel, 8);
  EXPECT_EQ(t.offset, 2);
  EXPECT_EQ(t.size, std::vector<int64_t>{3});
  EXPECT_EQ(t.stride, std::vector<int64_t>{2});
}

TEST(TorchPickle, RefusesATensorReachingPastItsStorage) {
  // Elements 2, 4, 6, 8 of a storage of 8: the last is outside.
  Status st = ReadPickle(OneTensorPickle(8, 2, 4, 2));
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("reaches element 8"), std::string::npos) << st.message();
  EXPECT_FALSE(ReadPickle(OneTensorPickle(8, -1, 1, 1)).ok());
  EXPECT_FALSE(ReadPickle(OneTensorPickle(8, 0, 2, -1)).ok());
  EXPECT_FALSE(ReadPickle(OneTensorPickle(-8, 0, 0, 1)).ok());
  // 2^31 - 1 rows of stride 2^31 - 1 reach far past 8, without overflowing.
  EXPECT_FALSE(ReadPickle(OneTensorPickle(8, 0, 0x7fffffff, 0x7fffffff)).ok());
}

TEST(TorchPickle, RefusesGlobalsAStateDictNeverNames) {
  // What pickle.dumps writes for an object whose __reduce__ returns (os.system, ("...",)).
  for (const std::string global : {"cposix\nsystem\n", "cbuiltins\neval\n", "c__builtin__\nexec\n",
                                   "ctorch\nload\n", "ctorch._tensor\n_rebuild_from_type_v2\n"}) {
    Status st = ReadPickle("\x80\x02" + global + "(" + Str("touch /tmp/x") + "tR.");
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
    const std::string name = global.substr(1, global.find('\n') - 1);
    EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("runs nothing"), std::string::npos) << st.message();
  }
  // The same through STACK_GLOBAL (protocol 4).
  Status st = ReadPickle("\x80\x04" + Str("os") + Str("system") + "\x93(" + Str("id") + "tR.");
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.message().find("os.system"), std::string::npos) << st.message();
}

TEST(TorchPickle, RefusesOpcodesThatInstantiateClasses) {
  for (const std::string op : {std::string("\x81", 1), std::string("\x92", 1), std::string("o"),
                               std::string("i")}) {
    Status st = ReadPickle("\x80\x02}(" + op + ".");
    EXPECT_FALSE(st.ok());
  }
  Status st = ReadPickle(std::string("\x80\x02}\x81."));
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.message().find("instantiates a class"), std::string::npos) << st.message();
}

TEST(TorchPickle, MalformedPicklesAreErrorsNotCrashes) {
  const std::string cases[] = {
      "",                                 // nothing
      "\x80\x02",                         // no STOP
      "\x80\x02.",                        // STOP on an empty stack
      "\x80\x02(.",                       // STOP with a MARK open
      "\x80\x02t.",                       // TUPLE without MARK
      "\x80\x02h\x05.",                   // memo entry never stored
      "\x80\x02X\xff\xff\xff\xff",        // a string longer than the input
      "\x80\x02\x8a\x09\x01",             // a LONG1 longer than the input
      "\x80\x02K\x01K\x02s.",             // SETITEM on an int
      "\x80\x02]K\x01u.",                 // SETITEMS without MARK
      "\x80\x02(K\x01}u.",                // (mark) 1 {} SETITEMS: odd items
      "\x80\x02\xff.",                    // unknown opcode
      "\x80\x09}.",                       // protocol 9
      "\x80\x02K\x01Q.",                  // a persistent id that is not a tuple
  };
  for (const std::string& c : cases) EXPECT_FALSE(ReadPickle(c).ok()) << "case of size " << c.size();
}

TEST(TorchPickle, DeepNestingAndSelfReferenceNeitherRecurseNorLeak) {
  // 1,000,000 lists, each appended to the one before: a recursive reader or
  // destructor would overflow the stack.
  std::string deep = "\x80\x02]";
  for (int i = 0; i < 1000000; ++i) deep += "]";
  for (int i = 0; i < 1000000; ++i) deep += "a";
  deep += ".";
  EXPECT_FALSE(ReadPickle(deep).ok());  // not a state dict
  size_t used = 0;
  auto plain = ReadPlainPickle(deep, "deep.pkl", &used);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("nests deeper"), std::string::npos);
  // A list that contains itself: l = []; l.append(l).
  const char kCycle[] = "\x80\x02]q\x00h\x00" "a.";
  const std::string cycle(kCycle, sizeof kCycle - 1);
  EXPECT_FALSE(ReadPlainPickle(cycle, "cycle.pkl", &used).ok());
}

TEST(TorchCheckpoint, LegacyFilesCutShortAreErrors) {
  auto file = ReadRegularFileIntoMemory(ModelDir("torch_f16_legacy") + "/pytorch_model.bin");
  ASSERT_TRUE(file.ok());
  const std::string_view bytes = file->bytes;
  ASSERT_TRUE(ParseTorchCheckpoint(bytes, file->owner, "whole").ok());
  for (size_t n = 0; n < bytes.size(); n += 61) {
    auto got = ParseTorchCheckpoint(bytes.substr(0, n), file->owner, "cut");
    EXPECT_FALSE(got.ok()) << "cut at " << n;
  }
}

TEST(TorchCheckpoint, ZipFilesCutShortAreErrors) {
  auto file = ReadRegularFileIntoMemory(ModelDir("torch_bf16") + "/pytorch_model.bin");
  ASSERT_TRUE(file.ok());
  const std::string_view bytes = file->bytes;
  ASSERT_TRUE(ParseTorchCheckpoint(bytes, file->owner, "whole").ok());
  for (size_t n = 0; n < bytes.size(); n += 997) {
    auto got = ParseTorchCheckpoint(bytes.substr(0, n), file->owner, "cut");
    EXPECT_FALSE(got.ok()) << "cut at " << n;
  }
}

TEST(TorchCheckpoint, NotACheckpoint) {
  auto owner = std::make_shared<std::string>("hello, not a checkpoint");
  auto got = ParseTorchCheckpoint(*owner, owner, "text.bin");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("is this a PyTorch checkpoint"), std::string::npos);
}

}  // namespace
}  // namespace bertrt::checkpoint

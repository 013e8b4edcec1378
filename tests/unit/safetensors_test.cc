#include "bertrt/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace bertrt {
namespace {

// Builds a safetensors byte string: 8-byte LE length, header, data.
std::string Pack(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string Floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

StatusOr<SafetensorsFile> ParseBytes(const std::string& bytes) {
  auto holder = std::make_shared<std::string>(bytes);
  return SafetensorsFile::Parse(*holder, holder, "test.safetensors");
}

// Asserts a clean error whose message names the file and contains `needle`.
void ExpectError(const std::string& bytes, StatusCode code, const std::string& needle) {
  auto f = ParseBytes(bytes);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), code) << f.status().ToString();
  EXPECT_NE(f.status().message().find("test.safetensors"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().message();
}

TEST(Safetensors, ValidRoundTrip) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},)"
      R"("s":{"dtype":"I64","shape":[],"data_offsets":[20,28]},)"
      R"("z":{"dtype":"BOOL","shape":[0],"data_offsets":[28,28]}})";
  std::string data = Floats({1, 2, 3, 4}) + std::string("\x00\x3c\x00\xc0", 4) +
                     std::string("\x07\0\0\0\0\0\0\0", 8);
  auto f = ParseBytes(Pack(header, data));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->entries().size(), 4u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafetensorsEntry* a = f->Find("a");
  ASSERT_NE(a, nullptr);
  Tensor t = f->View(*a);
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 2}));
  float vals[4];
  std::memcpy(vals, t.raw(), 16);
  EXPECT_EQ(vals[3], 4.0f);
  EXPECT_EQ(f->Find("b")->dtype, DType::kF16);
  EXPECT_EQ(f->View(*f->Find("s")).numel(), 1);
  EXPECT_EQ(f->View(*f->Find("z")).numel(), 0);
  EXPECT_EQ(f->Find("missing"), nullptr);
}

TEST(Safetensors, AllDTypesParse) {
  const char* names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
  const size_t sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};
  for (size_t i = 0; i < 10; ++i) {
    const std::string header = std::string(R"({"t":{"dtype":")") + names[i] +
                               R"(","shape":[3],"data_offsets":[0,)" +
                               std::to_string(3 * sizes[i]) + "]}}";
    auto f = ParseBytes(Pack(header, std::string(3 * sizes[i], '\x01')));
    ASSERT_TRUE(f.ok()) << names[i] << ": " << f.status().ToString();
    EXPECT_STREQ(DTypeName(f->Find("t")->dtype), names[i]);
  }
}

TEST(Safetensors, HeaderPaddedWithSpaces) {
  auto f = ParseBytes(Pack(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}    )", "x"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
}

TEST(Safetensors, TooShort) { ExpectError("abc", StatusCode::kDataLoss, "too short"); }

TEST(Safetensors, HeaderLengthLargerThanFile) {
  std::string b = Pack("{}", "");
  b[0] = 100;
  ExpectError(b, StatusCode::kDataLoss, "larger than");
}

TEST(Safetensors, AbsurdHeaderLength) {
  std::string b = Pack("{}", "");
  b[7] = '\x7f';
  ExpectError(b, StatusCode::kDataLoss, "100 MB");
}

TEST(Safetensors, HeaderNotJson) { ExpectError(Pack("{nope", ""), StatusCode::kDataLoss, "invalid JSON"); }

TEST(Safetensors, HeaderNotObject) {
  ExpectError(Pack("[1,2]", ""), StatusCode::kDataLoss, "expected an object");
}

TEST(Safetensors, DeeplyNestedJsonRejected) {
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  ExpectError(Pack(deep, ""), StatusCode::kDataLoss, "nested deeper");
}

TEST(Safetensors, BracketsInsideStringsDoNotCountAsNesting) {
  const std::string name = std::string(200, '[');
  auto f = ParseBytes(Pack("{\"" + name + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_NE(f->Find(name), nullptr);
}

TEST(Safetensors, EntryNotObject) {
  ExpectError(Pack(R"({"w":5})", ""), StatusCode::kDataLoss, "\"w\"");
}

TEST(Safetensors, MissingFields) {
  ExpectError(Pack(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd"), StatusCode::kDataLoss,
              "data_offsets");
}

TEST(Safetensors, UnknownDType) {
  ExpectError(Pack(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "a"),
              StatusCode::kUnimplemented, "F8_E4M3");
}

TEST(Safetensors, NegativeDimension) {
  ExpectError(Pack(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "a"),
              StatusCode::kDataLoss, "\"w\"");
}

TEST(Safetensors, FractionalOffset) {
  ExpectError(Pack(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1.5]}})", "a"),
              StatusCode::kDataLoss, "data_offsets");
}

TEST(Safetensors, ShapeOffsetMismatch) {
  ExpectError(Pack(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                   std::string(20, '\0')),
              StatusCode::kDataLoss, "needs 24");
}

TEST(Safetensors, NumelOverflow) {
  ExpectError(Pack(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
                   std::string(4, '\0')),
              StatusCode::kDataLoss, "too many elements");
}

TEST(Safetensors, HugeDimensionBesideZeroRejected) {
  // numel is 0, but the dimension itself does not fit in int64.
  ExpectError(Pack(R"({"w":{"dtype":"U8","shape":[0,18446744073709551615],"data_offsets":[0,0]}})", ""),
              StatusCode::kDataLoss, "too many elements");
}

TEST(Safetensors, ByteCountOverflow) {
  // numel fits in int64 but numel * 8 does not.
  ExpectError(Pack(R"({"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})",
                   std::string(8, '\0')),
              StatusCode::kDataLoss, "too many elements");
}

TEST(Safetensors, OffsetsOutOfRange) {
  ExpectError(Pack(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                   std::string(8, '\0')),
              StatusCode::kOutOfRange, "outside the data section");
}

TEST(Safetensors, HugeOffsetsOutOfRange) {
  ExpectError(Pack(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}})",
                   "a"),
              StatusCode::kOutOfRange, "outside the data section");
}

TEST(Safetensors, EndBeforeBegin) {
  ExpectError(Pack(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", "abcd"),
              StatusCode::kDataLoss, "end before begin");
}

TEST(Safetensors, OverlappingRanges) {
  ExpectError(Pack(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                   std::string(12, '\0')),
              StatusCode::kDataLoss, "overlap");
}

TEST(Safetensors, GapInDataSection) {
  ExpectError(Pack(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   std::string(8, '\0')),
              StatusCode::kDataLoss, "unclaimed");
}

TEST(Safetensors, TrailingBytesNotCovered) {
  ExpectError(Pack(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                   std::string(9, '\0')),
              StatusCode::kDataLoss, "cover only 4");
}

TEST(Safetensors, MetadataMustHoldStrings) {
  ExpectError(Pack(R"({"__metadata__":{"step":3}})", ""), StatusCode::kDataLoss, "__metadata__");
}

TEST(Safetensors, InvalidUtf8InHeader) {
  ExpectError(Pack("{\"\xff\":{}}", ""), StatusCode::kDataLoss, "invalid JSON");
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    dir_ = std::filesystem::temp_directory_path() /
           ("bertrt_st_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SafetensorsFileTest, OpenMapsAndOutlivesTheFileObject) {
  const std::string path =
      Write("m.safetensors",
            Pack(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", Floats({5, 6})));
  Tensor t;
  {
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->path(), path);
    t = f->View(*f->Find("a"));
  }
  // The tensor's owner keeps the mapping alive after the file object is gone.
  float v[2];
  std::memcpy(v, t.raw(), 8);
  EXPECT_EQ(v[0], 5.0f);
  EXPECT_EQ(v[1], 6.0f);
}

TEST_F(SafetensorsFileTest, OpenMissingFile) {
  auto f = SafetensorsFile::Open("/nonexistent/x.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent/x.safetensors"), std::string::npos);
}

TEST_F(SafetensorsFileTest, OpenEmptyFile) {
  const std::string path = Write("empty.safetensors", "");
  auto f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find(path), std::string::npos);
}

TEST_F(SafetensorsFileTest, OpenTruncatedFileNamesIt) {
  std::string bytes =
      Pack(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", Floats({1, 2, 3, 4}));
  bytes.resize(bytes.size() - 5);
  const std::string path = Write("trunc.safetensors", bytes);
  auto f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(f.status().message().find("trunc.safetensors"), std::string::npos);
  EXPECT_NE(f.status().message().find("\"a\""), std::string::npos);
}

}  // namespace
}  // namespace bertrt

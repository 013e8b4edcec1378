// KServe request decoding without a server: JSON and binary tensor data reach
// the same native request, and malformed sizes, shapes and datatypes are
// InvalidArgument naming the input (never a crash or a silent misread).
#include "server/common/kserve.h"

#include <gtest/gtest.h>

#include <cstring>

namespace bertrt::server {
namespace {

using nlohmann::json;

// The default batching options (max_client_batch_size: max_batch_size, 64).
const SchedulerOptions kBatching;

std::string Int64Bytes(const std::vector<int64_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}

std::string BytesElements(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) {
    const uint32_t len = static_cast<uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += s;
  }
  return out;
}

json IdsHeader(uint64_t size, std::vector<int64_t> shape = {2, 3}, std::string dtype = "INT64") {
  return {{"inputs",
           {{{"name", "input_ids"},
             {"datatype", dtype},
             {"shape", shape},
             {"parameters", {{"binary_data_size", size}}}}}}};
}

TEST(KServeDecode, BinaryIdsEqualJsonIds) {
  const std::vector<int64_t> ids = {2, 5, 3, 2, 7, 3};
  auto from_binary = DecodeKServeRequest(IdsHeader(48), kBatching, Int64Bytes(ids));
  ASSERT_TRUE(from_binary.ok()) << from_binary.status().ToString();
  json as_json = {
      {"inputs",
       {{{"name", "input_ids"}, {"datatype", "INT64"}, {"shape", {2, 3}}, {"data", ids}}}}};
  auto from_json = DecodeKServeRequest(as_json, kBatching);
  ASSERT_TRUE(from_json.ok());
  ASSERT_EQ(from_binary->sequences.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(from_binary->sequences[i].input_ids, from_json->sequences[i].input_ids);
  EXPECT_EQ(from_binary->sequences[1].input_ids, (std::vector<int32_t>{2, 7, 3}));
}

TEST(KServeDecode, BinaryTextsAndOutputFlags) {
  json header = {{"inputs",
                  {{{"name", "text"},
                    {"datatype", "BYTES"},
                    {"shape", {2, 1}},
                    {"parameters", {{"binary_data_size", 4 + 5 + 4 + 0 + 0}}}}}},
                 {"outputs", {{{"name", "logits"}, {"parameters", {{"binary_data", true}}}}}},
                 {"parameters", {{"binary_data_output", false}, {"truncate", true}}}};
  // The second element is empty: decoding keeps it, tokenizing rejects it later.
  auto r = DecodeKServeRequest(header, kBatching, BytesElements({"hello", ""}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->texts.size(), 2u);
  EXPECT_EQ(r->texts[0].text, "hello");
  EXPECT_EQ(r->texts[1].text, "");
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].binary, std::optional<bool>(true));
  EXPECT_FALSE(r->binary_output);
  EXPECT_TRUE(r->truncate);
}

TEST(KServeDecode, MalformedBinaryIsInvalidArgument) {
  const std::string ids = Int64Bytes({2, 5, 3, 2, 7, 3});
  struct Case {
    json header;
    std::string binary;
    const char* says;
  } cases[] = {
      {IdsHeader(100), ids, "runs past the end"},
      {IdsHeader(40), ids, "the data has 40 bytes"},
      {IdsHeader(48, {2, 2}), ids, "shape holds 4"},
      {IdsHeader(48, {2, 3}, "INT32"), ids, "24 bytes"},
      {IdsHeader(48, {2, -3}), ids, "non-negative"},
      {IdsHeader(48, {1 << 30, 1 << 30, 1 << 30}), ids, "too many elements"},
      {IdsHeader(48, {2, 3}, "FP128"), ids, "unknown datatype"},
      {{{"inputs",
         {{{"name", "text"},
           {"datatype", "BYTES"},
           {"shape", {1}},
           {"parameters", {{"binary_data_size", 7}}}}}}},
       std::string("\x63\0\0\0abc", 7),
       "runs past the end"},
      {{{"inputs",
         {{{"name", "text"},
           {"datatype", "BYTES"},
           {"shape", {1}},
           {"parameters", {{"binary_data_size", 2}}}}}}},
       "ab",
       "inside an element's length"},
      {{{"inputs",
         {{{"name", "text"},
           {"datatype", "BYTES"},
           {"shape", {2}},
           {"parameters", {{"binary_data_size", 5}}}}}}},
       BytesElements({"a"}),
       "shape holds 2"},
      {{{"inputs",
         {{{"name", "input_ids"},
           {"datatype", "INT64"},
           {"shape", {1, 3}},
           {"parameters", {{"binary_data_size", -1}}}}}}},
       ids,
       "byte count"},
      {{{"inputs",
         {{{"name", "input_ids"}, {"datatype", "INT64"}, {"shape", {1, 1}}, {"data", {1}}}}}},
       ids,
       "add up to 0"},
  };
  for (const Case& c : cases) {
    auto r = DecodeKServeRequest(c.header, kBatching, c.binary);
    ASSERT_FALSE(r.ok()) << c.header.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.header.dump();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.says << " not in: " << r.status().message();
  }
}

TEST(KServeDecode, RawInt32AndRangeChecks) {
  InputTensor t{"input_ids", "INT32", {1, 2}, {}, {}};
  const int32_t v[2] = {-7, 2147483647};
  ASSERT_TRUE(DecodeRawTensor(std::string_view(reinterpret_cast<const char*>(v), 8), t).ok());
  EXPECT_EQ(t.ints, (std::vector<int64_t>{-7, 2147483647}));
  InputTensor big{"input_ids", "INT64", {1, 1}, {}, {int64_t{1} << 40}};
  KServeRequest r;
  Status st = AssembleKServeRequest({big}, kBatching, r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("out of range"), std::string::npos);
  InputTensor text{"text", "BYTES", {1, 2}, {"a", "b"}, {}};
  st = AssembleKServeRequest({text}, kBatching, r);
  EXPECT_NE(st.message().find("[N] or [N, 1], got [1, 2]"), std::string::npos) << st.message();
}

// Every input is optional on its own (InputMetadata marks them so, as Triton's
// config does); a request needs text or input_ids, and says what it had.
TEST(KServeDecode, EveryInputOptionalButOneSetNeeded) {
  for (const TensorMetadata& t : InputMetadata()) EXPECT_TRUE(t.optional) << t.name;
  KServeRequest r;
  InputTensor mask{"attention_mask", "INT64", {1, 2}, {}, {1, 1}};
  InputTensor pair{"text_pair", "BYTES", {1}, {"b"}, {}};
  Status st = AssembleKServeRequest({mask, pair}, kBatching, r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("needs text [+ text_pair] or input_ids"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("it has \"attention_mask\", \"text_pair\""), std::string::npos)
      << st.message();
  InputTensor text{"text", "BYTES", {1}, {"a"}, {}};
  ASSERT_TRUE(AssembleKServeRequest({text, pair}, kBatching, r).ok());
  EXPECT_EQ(r.texts.size(), 1u);
  KServeRequest ids_only;
  InputTensor ids{"input_ids", "INT64", {1, 2}, {}, {2, 3}};
  ASSERT_TRUE(AssembleKServeRequest({ids}, kBatching, ids_only).ok());
  EXPECT_EQ(ids_only.sequences.size(), 1u);
}

// Issue 44, D3: dimensions are checked before rows are made from them. A
// 100-byte body declaring [10000000, 0] ids made 10M empty rows (1.1 GB).
TEST(KServeDecode, ShapesAreCheckedBeforeAnythingIsAllocatedFromThem) {
  struct Case {
    std::vector<int64_t> shape;
    StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {{10000000, 0}, StatusCode::kInvalidArgument, "dimension below 1"},
      {{int64_t{1} << 40, 0}, StatusCode::kInvalidArgument, "dimension below 1"},
      {{0, 5}, StatusCode::kInvalidArgument, "dimension below 1"},
      {{2049, 1}, StatusCode::kOutOfRange, "more than max_client_batch_size 2048"},
  };
  for (const Case& c : cases) {
    json body = {{"inputs",
                  {{{"name", "input_ids"},
                    {"datatype", "INT64"},
                    {"shape", c.shape},
                    {"data", std::vector<int64_t>(c.shape[0] == 2049 ? 2049 : 0, 2)}}}}};
    auto r = DecodeKServeRequest(body, kBatching);
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_EQ(r.status().code(), c.code) << r.status().message();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
  // Texts too: [N] past the limit, whatever the data.
  json texts = {
      {"inputs",
       {{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {100000}}, {"data", json::array()}}}}};
  EXPECT_EQ(DecodeKServeRequest(texts, kBatching).status().code(), StatusCode::kInvalidArgument);
  // BYTES binary data: more elements than the shape is refused at the first extra one.
  InputTensor t{"text", "BYTES", {1}, {}, {}};
  EXPECT_FALSE(DecodeRawTensor(std::string(4 * 1000, '\0'), t).ok());
  EXPECT_LE(t.strings.size(), 1u);
}

TEST(KServeDecode, ClassificationParameterIsACount) {
  json body = {
      {"inputs", {{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {1}}, {"data", {"a"}}}}},
      {"outputs", {{{"name", "logits"}, {"parameters", {{"classification", 2}}}}}}};
  auto r = DecodeKServeRequest(body, kBatching);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->outputs[0].class_count, 2);
  body["outputs"][0]["parameters"]["classification"] = "2";
  EXPECT_EQ(DecodeKServeRequest(body, kBatching).status().code(), StatusCode::kInvalidArgument);
  body["outputs"][0]["parameters"]["classification"] = -1;
  EXPECT_EQ(DecodeKServeRequest(body, kBatching).status().code(), StatusCode::kInvalidArgument);
}

TEST(KServeEncode, BytesOutputsAreLengthPrefixed) {
  OutputTensor t;
  t.datatype = "BYTES";
  t.strings = {"0.5:1:POS", ""};
  const std::string raw = RawTensorBytes(t);
  ASSERT_EQ(raw.size(), 4u + 9 + 4);
  uint32_t len = 0;
  std::memcpy(&len, raw.data(), 4);
  EXPECT_EQ(len, 9u);
  EXPECT_EQ(raw.substr(4, 9), "0.5:1:POS");
}

}  // namespace
}  // namespace bertrt::server

#include "server/grpc/grpc_wire.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace bertrt::server {
namespace {

using namespace std::chrono_literals;

std::string Framed(std::string_view body, char flag = 0) {
  std::string out = FramedGrpcMessage(body);
  out[0] = flag;
  return out;
}

TEST(GrpcMessageReader, ReassemblesMessagesSplitAnywhere) {
  const std::string wire = Framed("hello") + Framed("") + Framed("world!");
  for (size_t step = 1; step <= wire.size(); ++step) {
    GrpcMessageReader reader(100);
    std::vector<GrpcMessage> got;
    for (size_t i = 0; i < wire.size(); i += step)
      ASSERT_FALSE(reader.Feed(std::string_view(wire).substr(i, step), got));
    ASSERT_EQ(got.size(), 3u) << "step " << step;
    EXPECT_EQ(got[0].bytes, "hello");
    EXPECT_EQ(got[1].bytes, "");  // an empty message (ServerLiveRequest) is a message
    EXPECT_EQ(got[2].bytes, "world!");
    EXPECT_FALSE(reader.mid_message());
  }
}

TEST(GrpcMessageReader, RefusesADeclaredLengthPastTheLimitFromItsPrefix) {
  GrpcMessageReader reader(1000);
  std::vector<GrpcMessage> got;
  // Only the prefix: nothing of the 2^32-1 bytes it declares is needed to refuse it.
  auto error = reader.Feed(std::string("\0\xff\xff\xff\xff", 5), got);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, GrpcCode::kResourceExhausted);
  EXPECT_NE(error->message.find("--max-payload-bytes 1000"), std::string::npos) << error->message;
  EXPECT_TRUE(got.empty());
}

TEST(GrpcMessageReader, RefusesACompressedFlagOtherThanZeroOrOne) {
  GrpcMessageReader reader(1000);
  std::vector<GrpcMessage> got;
  auto error = reader.Feed(Framed("x", 2), got);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, GrpcCode::kInternal);
}

TEST(GrpcMessageReader, SaysWhenAMessageIsCutShort) {
  GrpcMessageReader reader(1000);
  std::vector<GrpcMessage> got;
  ASSERT_FALSE(reader.Feed(Framed("abcdef").substr(0, 7), got));
  EXPECT_TRUE(reader.mid_message());
}

std::string Deflated(const std::string& in, int window_bits) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = in.size();
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = out.size();
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(DecompressGrpcMessage, InflatesGzipAndDeflateWithinTheLimit) {
  const std::string text(5000, 'a');
  for (auto [encoding, bits] :
       {std::pair{GrpcEncoding::kGzip, 15 + 16}, std::pair{GrpcEncoding::kDeflate, 15}}) {
    GrpcMessage m{true, Deflated(text, bits)};
    EXPECT_FALSE(DecompressGrpcMessage(m, encoding, 10000));
    EXPECT_EQ(m.bytes, text);
    GrpcMessage bomb{true, Deflated(text, bits)};
    auto error = DecompressGrpcMessage(bomb, encoding, 1000);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, GrpcCode::kResourceExhausted);
  }
  GrpcMessage flagged{true, "abc"};
  auto error = DecompressGrpcMessage(flagged, GrpcEncoding::kIdentity, 1000);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, GrpcCode::kInternal);
}

TEST(GrpcWire, ParsesGrpcTimeout) {
  EXPECT_EQ(ParseGrpcTimeout("100m"), std::chrono::nanoseconds(100ms));
  EXPECT_EQ(ParseGrpcTimeout("2S"), std::chrono::nanoseconds(2s));
  EXPECT_EQ(ParseGrpcTimeout("1H"), std::chrono::nanoseconds(1h));
  EXPECT_EQ(ParseGrpcTimeout("7n"), std::chrono::nanoseconds(7));
  // Eight digits of hours would overflow nanoseconds: held at a century's worth.
  EXPECT_GT(*ParseGrpcTimeout("99999999H"), std::chrono::nanoseconds(24h * 365 * 50));
  for (const char* bad : {"", "m", "100", "123456789S", "10x", "-1S", "1.5S"})
    EXPECT_FALSE(ParseGrpcTimeout(bad)) << bad;
}

TEST(GrpcWire, PercentEncodesGrpcMessage) {
  EXPECT_EQ(PercentEncodedGrpcMessage("plain text: ok"), "plain text: ok");
  EXPECT_EQ(PercentEncodedGrpcMessage("100%\n"), "100%25%0A");
  EXPECT_EQ(PercentEncodedGrpcMessage("modèle"), "mod%C3%A8le");
}

TEST(GrpcWire, KnowsItsEncodings) {
  EXPECT_EQ(ParseGrpcEncoding(""), GrpcEncoding::kIdentity);
  EXPECT_EQ(ParseGrpcEncoding("gzip"), GrpcEncoding::kGzip);
  EXPECT_EQ(ParseGrpcEncoding("deflate"), GrpcEncoding::kDeflate);
  EXPECT_FALSE(ParseGrpcEncoding("snappy"));
}

}  // namespace
}  // namespace bertrt::server

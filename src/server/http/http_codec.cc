#include "server/http/http_codec.h"

#include <zlib.h>

#include <array>

namespace bertrt::server {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string PayloadTooLarge(size_t limit) {
  return "payload larger than --max-payload-bytes " + std::to_string(limit);
}

std::string PercentDecoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

StatusOr<std::string> Inflate(std::string_view in, size_t limit) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK)  // 15 + 32: gzip or zlib, by the header
    return Internal("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  std::array<char, 64 << 10> chunk;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(chunk.data(), chunk.size() - z.avail_out);
    if (out.size() > limit) break;
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) break;  // truncated
  }
  inflateEnd(&z);
  if (out.size() > limit) return OutOfRange(PayloadTooLarge(limit) + " (after decoding)");
  if (rc != Z_STREAM_END)
    return InvalidArgument("the request body is not valid gzip/deflate (Content-Encoding)");
  return out;
}

}  // namespace bertrt::server

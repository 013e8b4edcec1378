#include "server/grpc/grpc_wire.h"

#include <algorithm>
#include <cctype>

#include "server/http/http_codec.h"

namespace bertrt::server {

std::optional<GrpcEncoding> ParseGrpcEncoding(std::string_view value) {
  if (value.empty() || value == "identity") return GrpcEncoding::kIdentity;
  if (value == "gzip") return GrpcEncoding::kGzip;
  if (value == "deflate") return GrpcEncoding::kDeflate;
  return std::nullopt;
}

std::optional<GrpcReply> GrpcMessageReader::Feed(std::string_view data,
                                                 std::vector<GrpcMessage>& out) {
  while (!data.empty() || (prefix_len_ == 5 && need_ == 0)) {
    if (prefix_len_ < 5) {
      const size_t take = std::min(5 - prefix_len_, data.size());
      std::copy_n(data.data(), take, prefix_ + prefix_len_);
      prefix_len_ += take;
      data.remove_prefix(take);
      if (prefix_len_ < 5) break;
      if (prefix_[0] > 1)
        return GrpcReply::Error(GrpcCode::kInternal, "a message's compressed flag is " +
                                                         std::to_string(prefix_[0]) +
                                                         "; gRPC allows 0 or 1");
      need_ = (size_t{prefix_[1]} << 24) | (size_t{prefix_[2]} << 16) | (size_t{prefix_[3]} << 8) |
              size_t{prefix_[4]};
      if (need_ > max_bytes_)
        return GrpcReply::Error(
            GrpcCode::kResourceExhausted,
            "a request message of " + std::to_string(need_) +
                " bytes is larger than this server takes (bertrt serve --max-payload-bytes " +
                std::to_string(max_bytes_) + ")");
      current_.compressed = prefix_[0] == 1;
    }
    const size_t take = std::min(need_, data.size());
    current_.bytes.append(data.data(), take);
    data.remove_prefix(take);
    need_ -= take;
    if (need_ > 0) break;
    out.push_back(std::move(current_));
    current_ = {};
    prefix_len_ = 0;
  }
  return std::nullopt;
}

std::optional<GrpcReply> DecompressGrpcMessage(GrpcMessage& message, GrpcEncoding encoding,
                                               size_t max_bytes) {
  if (!message.compressed) return std::nullopt;
  if (encoding == GrpcEncoding::kIdentity)
    return GrpcReply::Error(GrpcCode::kInternal,
                            "a message has its compressed flag set but the call's grpc-encoding "
                            "names no compression");
  // Inflate reads either zlib's (gRPC's "deflate") or gzip's header.
  auto inflated = Inflate(message.bytes, max_bytes);
  if (!inflated.ok()) {
    if (inflated.status().code() == StatusCode::kOutOfRange)
      return GrpcReply::Error(GrpcCode::kResourceExhausted,
                              "a request message inflates to more than this server takes "
                              "(bertrt serve --max-payload-bytes " +
                                  std::to_string(max_bytes) + ")");
    return GrpcReply::Error(GrpcCode::kInternal, "a compressed message could not be inflated: " +
                                                     inflated.status().message());
  }
  message.bytes = std::move(*inflated);
  message.compressed = false;
  return std::nullopt;
}

std::string FramedGrpcMessage(std::string_view body) {
  std::string out;
  out.reserve(5 + body.size());
  const auto n = static_cast<uint32_t>(body.size());
  out.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(body);
  return out;
}

std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  int64_t amount = 0;
  for (char c : value.substr(0, value.size() - 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    amount = amount * 10 + (c - '0');
  }
  int64_t unit = 0;  // nanoseconds
  switch (value.back()) {
    case 'H':
      unit = 3'600'000'000'000;
      break;
    case 'M':
      unit = 60'000'000'000;
      break;
    case 'S':
      unit = 1'000'000'000;
      break;
    case 'm':
      unit = 1'000'000;
      break;
    case 'u':
      unit = 1'000;
      break;
    case 'n':
      unit = 1;
      break;
    default:
      return std::nullopt;
  }
  // Eight digits of hours overflow 64-bit nanoseconds: held at about a century.
  constexpr int64_t kCentury = int64_t{100} * 365 * 24 * 3'600'000'000'000;
  return std::chrono::nanoseconds(amount > kCentury / unit ? kCentury : amount * unit);
}

std::string PercentEncodedGrpcMessage(std::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (unsigned char c : message) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

}  // namespace bertrt::server

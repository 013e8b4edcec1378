// gRPC's framing over HTTP/2, the parts that are byte handling alone (kept
// apart from the connection so that unit tests and a fuzz target reach them):
// length-prefixed messages, their compression, the grpc-timeout header and
// grpc-message's percent-encoding. See
// https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/grpc/grpc_method.h"

namespace bertrt::server {

// The compressions a request message may use (grpc-encoding), and the
// grpc-accept-encoding every answer carries. Answers are sent uncompressed.
enum class GrpcEncoding { kIdentity, kGzip, kDeflate };
inline constexpr std::string_view kGrpcAcceptEncoding = "identity,deflate,gzip";
// nullopt for an encoding this server cannot read (the call is then
// UNIMPLEMENTED, as gRPC prescribes). Empty: identity.
std::optional<GrpcEncoding> ParseGrpcEncoding(std::string_view value);

// A message as it arrived: its bytes, and whether the compressed flag was set.
struct GrpcMessage {
  bool compressed = false;
  std::string bytes;
};

// Reassembles length-prefixed messages (1 byte compressed flag, 4 bytes
// big-endian length, the bytes) from a stream's DATA. A message that declares
// more than `max_bytes` is refused from its prefix, before its bytes are
// buffered; buffers grow with the bytes that arrive, never with the length a
// client declares.
class GrpcMessageReader {
 public:
  explicit GrpcMessageReader(size_t max_bytes) : max_bytes_(max_bytes) {}
  // Appends `data`, moving each message it completes to `out`. An error
  // (RESOURCE_EXHAUSTED past the limit, INTERNAL for a flag that is neither 0
  // nor 1) ends the call; the reader is not to be fed again.
  std::optional<GrpcReply> Feed(std::string_view data, std::vector<GrpcMessage>& out);
  // Whether a message has begun and not ended (a stream that ends here was
  // cut short).
  bool mid_message() const { return prefix_len_ > 0; }

 private:
  const size_t max_bytes_;
  unsigned char prefix_[5] = {};
  size_t prefix_len_ = 0;
  size_t need_ = 0;  // bytes of the current message still to come
  GrpcMessage current_;
};

// The message's bytes as the handler is to read them: inflated when its
// compressed flag is set (RESOURCE_EXHAUSTED past `max_bytes` inflated,
// INTERNAL when it cannot be inflated or the call named no compression).
std::optional<GrpcReply> DecompressGrpcMessage(GrpcMessage& message, GrpcEncoding encoding,
                                               size_t max_bytes);

// A response message with its 5-byte prefix (never compressed).
std::string FramedGrpcMessage(std::string_view body);

// grpc-timeout ("1-8 digits" then H, M, S, m, u or n); nullopt when malformed.
std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value);

// grpc-message's value: bytes outside printable ASCII, and '%', as %XX.
std::string PercentEncodedGrpcMessage(std::string_view message);

}  // namespace bertrt::server

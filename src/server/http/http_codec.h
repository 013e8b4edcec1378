// What the HTTP front end decodes from untrusted bytes before a handler sees
// a request: the path's %XX escapes and a gzip/deflate body. Kept apart from
// the connections so that a fuzz target (fuzz/http_codec_fuzz.cc) reaches them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "bertrt/status.h"

namespace bertrt::server {

// "payload larger than --max-payload-bytes N", the 413's message.
std::string PayloadTooLarge(size_t limit);

// The path with %XX escapes decoded (a malformed escape stays as it is).
std::string PercentDecoded(std::string_view s);

// A gzip or zlib body inflated, stopping as soon as it passes `limit` bytes
// (a 200 KB gzip body of zeros inflates to 200 MB): OutOfRange then, and
// InvalidArgument for a body that is not gzip/deflate or is cut short.
StatusOr<std::string> Inflate(std::string_view in, size_t limit);

}  // namespace bertrt::server

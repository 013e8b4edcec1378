// The optional API key, checked the same way by every front end.
#pragma once

#include <string_view>

namespace bertrt::server {

// True when `key` is empty (no key configured) or `authorization` (the HTTP
// header / gRPC metadata value) is "Bearer <key>". The time taken depends only
// on the key's length, not on how much of it a guess got right.
bool BearerKeyMatches(std::string_view authorization, std::string_view key);

}  // namespace bertrt::server

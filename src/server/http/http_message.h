// What an HTTP route handler sees of a request and fills in of its
// response: plain values, independent of the connection code (Boost.Beast)
// that parses and writes them. Header names compare case-insensitively.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http/router.h"

namespace bertrt::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

bool HeaderNameEquals(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;       // "GET", "POST", ...
  std::string path;         // percent-decoded, without the query string
  std::string body;         // decoded (chunked and Content-Encoding undone)
  std::string remote_addr;  // the peer's numeric address
  HttpHeaders headers;
  // The route's parameters ({model}, {version}), matched on `path`.
  RouteParams params;
  // True once the client has gone (its connection reset); empty when not
  // watched. For the scheduler's InferRequest::is_cancelled.
  std::function<bool()> client_gone;

  bool has_header(std::string_view name) const { return get_header_value_count(name) > 0; }
  // The `index`th value of header `name`, or "".
  std::string get_header_value(std::string_view name, size_t index = 0) const;
  size_t get_header_value_count(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  HttpHeaders headers;

  void set_content(std::string content, std::string content_type) {
    body = std::move(content);
    set_header("Content-Type", std::move(content_type));
  }
  // Replaces any value the header had.
  void set_header(std::string_view name, std::string value);
  std::string get_header_value(std::string_view name) const;
};

}  // namespace bertrt::server

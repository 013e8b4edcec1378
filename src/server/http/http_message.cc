#include "server/http/http_message.h"

#include <algorithm>
#include <cctype>

namespace bertrt::server {

bool HeaderNameEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string HttpRequest::get_header_value(std::string_view name, size_t index) const {
  for (const auto& [key, value] : headers)
    if (HeaderNameEquals(key, name) && index-- == 0) return value;
  return {};
}

size_t HttpRequest::get_header_value_count(std::string_view name) const {
  return std::count_if(headers.begin(), headers.end(),
                       [&](const auto& h) { return HeaderNameEquals(h.first, name); });
}

void HttpResponse::set_header(std::string_view name, std::string value) {
  for (auto& [key, v] : headers)
    if (HeaderNameEquals(key, name)) {
      v = std::move(value);
      return;
    }
  headers.emplace_back(std::string(name), std::move(value));
}

std::string HttpResponse::get_header_value(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (HeaderNameEquals(key, name)) return value;
  return {};
}

}  // namespace bertrt::server

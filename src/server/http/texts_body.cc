#include "server/http/texts_body.h"

#include <simdjson.h>

#include <optional>

namespace bertrt::server {

std::optional<TextsBody> ReadTextsBody(std::string_view body, std::string_view field) {
  namespace od = simdjson::ondemand;
  // One parser per handler thread keeps its buffers (about five bytes per
  // byte of body) for the next body; a large body gets a parser of its own,
  // freed with it, so that no thread keeps the largest body it ever saw.
  constexpr size_t kKeptParserBody = 64 << 10;
  thread_local od::parser kept;
  std::optional<od::parser> own;
  od::parser& parser = body.size() <= kKeptParserBody ? kept : own.emplace();
  // simdjson reads a NUL byte as the end of the text (its padding), where
  // JSON has none: such a body is the full parse's to refuse.
  if (body.find('\0') != std::string_view::npos) return std::nullopt;
  const simdjson::padded_string padded(body);
  TextsBody out;
  bool found = false;
  // simdjson reports errors through its results: any of them means "not this
  // shape", and the full parse decides.
  auto read = [&]() -> simdjson::error_code {
    od::document doc;
    if (auto e = parser.iterate(padded).get(doc)) return e;
    od::object object;
    if (auto e = doc.get_object().get(object)) return e;
    for (auto member : object) {
      std::string_view key;
      if (auto e = member.unescaped_key().get(key)) return e;
      od::value value;
      if (auto e = member.value().get(value)) return e;
      od::json_type type;
      if (auto e = value.type().get(type)) return e;
      if (key == field) {
        // A repeated key: the last one counts, as in the full parse.
        out.texts.clear();
        found = true;
        if (type == od::json_type::string) {
          std::string_view text;
          if (auto e = value.get_string().get(text)) return e;
          out.texts.emplace_back(text);
          out.batch = false;
          continue;
        }
        if (type != od::json_type::array) return simdjson::INCORRECT_TYPE;
        out.batch = true;
        od::array list;
        if (auto e = value.get_array().get(list)) return e;
        for (auto item : list) {
          std::string_view text;
          if (auto e = item.get_string().get(text)) return e;  // token ids: the full parse
          out.texts.emplace_back(text);
        }
        if (out.texts.empty()) return simdjson::INCORRECT_TYPE;  // its own error
        continue;
      }
      if (type == od::json_type::object || type == od::json_type::array)
        return simdjson::INCORRECT_TYPE;
      const std::string_view token = value.raw_json_token();
      // A scalar's own token: nlohmann reads it as the full parse would.
      nlohmann::json scalar = nlohmann::json::parse(token, nullptr, /*allow_exceptions=*/false);
      if (scalar.is_discarded()) return simdjson::INCORRECT_TYPE;
      out.rest[std::string(key)] = std::move(scalar);
    }
    // Nothing may follow the object: past its end there is no location.
    if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS)
      return simdjson::TRAILING_CONTENT;
    return simdjson::SUCCESS;
  };
  if (read() != simdjson::SUCCESS || !found) return std::nullopt;
  return out;
}

}  // namespace bertrt::server

#include "server/http/texts_body.h"

#include <simdjson.h>

#include <optional>

namespace bertrt::server {

namespace {

// A scalar as nlohmann's parse gives it (integers as signed where they fit).
std::optional<nlohmann::json> Scalar(simdjson::dom::element value) {
  using Type = simdjson::dom::element_type;
  switch (value.type()) {
    case Type::INT64:
      return nlohmann::json(int64_t(value.get_int64()));
    case Type::UINT64:
      return nlohmann::json(uint64_t(value.get_uint64()));
    case Type::DOUBLE:
      return nlohmann::json(double(value.get_double()));
    case Type::STRING:
      return nlohmann::json(std::string(std::string_view(value.get_string())));
    case Type::BOOL:
      return nlohmann::json(bool(value.get_bool()));
    case Type::NULL_VALUE:
      return nlohmann::json(nullptr);
    default:
      return std::nullopt;  // an object or a list
  }
}

}  // namespace

std::optional<TextsBody> ReadTextsBody(std::string_view body, std::string_view field) {
  namespace dom = simdjson::dom;
  // simdjson reads a NUL byte as the end of the text (its padding), where
  // JSON has none: such a body is the full parse's to refuse.
  if (body.find('\0') != std::string_view::npos) return std::nullopt;
  // One parser per handler thread keeps its buffers (several bytes per byte
  // of body) for the next body; a large body gets a parser of its own, freed
  // with it, so that no thread keeps the largest body it ever saw.
  constexpr size_t kKeptParserBody = 64 << 10;
  thread_local dom::parser kept;
  std::optional<dom::parser> own;
  dom::parser& parser = body.size() <= kKeptParserBody ? kept : own.emplace();
  // The DOM parser validates the whole text (structure, UTF-8, escapes,
  // numbers), as nlohmann's does; its tape holds no allocation per value.
  dom::element doc;
  if (parser.parse(body.data(), body.size(), /*realloc_if_needed=*/true).get(doc))
    return std::nullopt;
  dom::object object;
  if (doc.get_object().get(object)) return std::nullopt;
  TextsBody out;
  bool found = false;
  for (dom::key_value_pair member : object) {
    if (member.key == field) {
      // A repeated key: the last one counts, as in the full parse.
      out.texts.clear();
      found = true;
      std::string_view text;
      if (!member.value.get_string().get(text)) {
        out.texts.emplace_back(text);
        out.batch = false;
        continue;
      }
      dom::array list;
      if (member.value.get_array().get(list)) return std::nullopt;
      out.batch = true;
      for (dom::element item : list) {
        if (item.get_string().get(text)) return std::nullopt;  // token ids: the full parse
        out.texts.emplace_back(text);
      }
      if (out.texts.empty()) return std::nullopt;  // its own error
      continue;
    }
    std::optional<nlohmann::json> scalar = Scalar(member.value);
    if (!scalar) return std::nullopt;
    out.rest[std::string(member.key)] = std::move(*scalar);
  }
  if (!found) return std::nullopt;
  return out;
}

}  // namespace bertrt::server

// The embedding routes' bodies read for their texts without nlohmann's
// tree: simdjson's DOM parser (which validates the whole text as nlohmann's
// does, into a tape with no allocation per value) takes /embed's and
// /v1/embeddings' usual bodies (a string or a list of strings, and scalar
// options) about twenty times faster (bench/request_parse_bench.cc: 62 ->
// 2.6 us for 32 texts of 250 chars on the CPU machine), time the handler
// threads spend on every request. Anything else (token ids, nested values,
// an empty list, malformed JSON) is left to the full parse, which also words
// the errors, so answers do not depend on which path read them
// (fuzz/texts_body_fuzz.cc holds the two to the same reading).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bertrt::server {

struct TextsBody {
  std::vector<std::string> texts;
  bool batch = false;  // `field` was a list
  // The other top-level fields (all scalars), as the full parse would give them.
  nlohmann::json rest = nlohmann::json::object();
};

// `body`'s texts under `field` and its other fields, or nullopt when the
// body is not a JSON object of that shape.
std::optional<TextsBody> ReadTextsBody(std::string_view body, std::string_view field);

}  // namespace bertrt::server

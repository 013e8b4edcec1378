// ReadTextsBody: the embedding routes' usual bodies read as the full parse
// reads them, and every other shape left to the full parse.
#include "server/http/texts_body.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace bertrt::server {
namespace {

TEST(TextsBody, ReadsTextsAndScalarsAsTheFullParse) {
  const std::string body =
      R"({"inputs": ["a", "caf\u00e9 \ud83d\ude00", "tab\there"], "truncate": true,)"
      R"( "normalize": false, "dimensions": 0, "model": "m\"x", "prompt_name": null, "y": 1.5e3})";
  auto fast = ReadTextsBody(body, "inputs");
  ASSERT_TRUE(fast);
  nlohmann::json full = nlohmann::json::parse(body);
  EXPECT_TRUE(fast->batch);
  EXPECT_EQ(nlohmann::json(fast->texts), full["inputs"]);
  EXPECT_EQ(fast->texts[1], "caf\xc3\xa9 \xf0\x9f\x98\x80");
  full.erase("inputs");
  EXPECT_EQ(fast->rest, full);

  auto one = ReadTextsBody(R"( {"input": "one text"} )", "input");
  ASSERT_TRUE(one);
  EXPECT_FALSE(one->batch);
  EXPECT_EQ(one->texts, std::vector<std::string>{"one text"});
  EXPECT_TRUE(one->rest.empty());
  // A body past what a thread's parser keeps: read by a parser of its own.
  const std::vector<std::string> many(300, std::string(250, 'x'));
  auto large = ReadTextsBody(nlohmann::json{{"inputs", many}}.dump(), "inputs");
  ASSERT_TRUE(large);
  EXPECT_EQ(large->texts, many);
  // A repeated key: the last, as nlohmann keeps it.
  auto twice = ReadTextsBody(R"({"inputs": "first", "inputs": ["second"]})", "inputs");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->texts, std::vector<std::string>{"second"});
}

TEST(TextsBody, LeavesEveryOtherShapeToTheFullParse) {
  for (const char* body : {
           R"({"inputs": [1, 2, 3]})",            // token ids
           R"({"inputs": [[1, 2], [3]]})",        // lists of token ids
           R"({"inputs": ["a", 1]})",             // mixed
           R"({"inputs": []})",                   // empty: its own error
           R"({"inputs": 7})",                    // neither
           R"({"truncate": true})",               // no inputs
           R"({"inputs": "a", "options": {}})",   // a nested field
           R"({"inputs": "a", "x": [1]})",        // a list field
           R"(["inputs", "a"])",                  // not an object
           R"({"inputs": "a"} {"inputs": "b"})",  // trailing content
           R"({"inputs": "a",})",                 // malformed
           R"({"inputs": "a)",                    // cut short
           "{\"inputs\": \"\xff\xfe\"}",          // invalid UTF-8
           R"({"inputs": "\ud800"})",             // a lone surrogate
           "",
       })
    EXPECT_FALSE(ReadTextsBody(body, "inputs")) << body;
  // NUL bytes after a value (fuzz/texts_body_fuzz.cc found simdjson taking
  // them for the end of the text) and inside a string.
  for (const std::string body : {std::string("{\"inputs\": \"a\", \"t\": true\0\0\0"
                                             "7}",
                                             30),
                                 std::string("{\"inputs\": \"a\0b\"}", 17)})
    EXPECT_FALSE(ReadTextsBody(body, "inputs")) << nlohmann::json(body).dump();
}

}  // namespace
}  // namespace bertrt::server

// The component pipeline against goldens from HF `tokenizers` 0.23.3
// (scripts/make_tokenizer_goldens.py): the XLM-R-, RoBERTa- and
// ModernBERT-shape tokenizers on the corpus and the component texts, singles
// and pairs, without truncation and at max_length 16 under each strategy.
// Ids, type ids, offsets and special tokens masks must be identical, an
// encoding HF refuses must be refused, and decoding must give HF's text.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bertrt/tokenizer.h"

namespace bertrt {
namespace {

class PipelineGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PipelineGoldenTest, MatchesHfTokenizers) {
  const std::string dir = std::string(BERTRT_TEST_DATA_DIR "/tokenizer/") + GetParam();
  auto tok = Tokenizer::FromDirectory(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::ifstream in(dir + "/golden.jsonl");
  ASSERT_TRUE(in) << dir << "/golden.jsonl";
  size_t compared = 0;
  size_t mismatches = 0;
  size_t decode_mismatches = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto g = nlohmann::json::parse(line);
    std::optional<std::string> pair;
    if (g.contains("text_pair")) pair = g["text_pair"].get<std::string>();
    auto truncation = ParseTruncation(g["truncation"].get<std::string>());
    ASSERT_TRUE(truncation.ok());
    const std::string text = g["text"].get<std::string>();
    auto enc = (*tok)->Encode(text, pair ? std::optional<std::string_view>(*pair) : std::nullopt,
                              g["max_length"].get<size_t>(), *truncation);
    ++compared;
    if (g.contains("error")) {
      EXPECT_FALSE(enc.ok()) << line;
      mismatches += enc.ok();
      continue;
    }
    ASSERT_TRUE(enc.ok()) << enc.status().ToString() << "\n" << line;
    std::vector<std::pair<uint32_t, uint32_t>> offsets;
    for (const auto& o : g["offsets"])
      offsets.emplace_back(o[0].get<uint32_t>(), o[1].get<uint32_t>());
    const bool same =
        enc->input_ids == g["input_ids"].get<std::vector<int32_t>>() &&
        enc->token_type_ids == g["token_type_ids"].get<std::vector<int32_t>>() &&
        enc->offsets == offsets &&
        enc->special_tokens_mask == g["special_tokens_mask"].get<std::vector<uint8_t>>();
    EXPECT_TRUE(same) << GetParam() << ": " << line;
    mismatches += !same;
    if (g.contains("decoded")) {
      const std::string plain = (*tok)->Decode(enc->input_ids, /*skip_special_tokens=*/true);
      const std::string all = (*tok)->Decode(enc->input_ids, /*skip_special_tokens=*/false);
      EXPECT_EQ(plain, g["decoded"].get<std::string>()) << GetParam() << ": " << line;
      EXPECT_EQ(all, g["decoded_with_special"].get<std::string>()) << GetParam() << ": " << line;
      decode_mismatches += plain != g["decoded"].get<std::string>() ||
                           all != g["decoded_with_special"].get<std::string>();
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(decode_mismatches, 0u);
  EXPECT_GT(compared, 1000u);
}

// Decoders other than the files' own (Sequence, Replace, ByteFallback, Fuse,
// Strip, Metaspace without prepending, WordPiece, BPEDecoder, none) against
// HF's decode (tests/data/tokenizer/decoders.json).
TEST(PipelineGoldenDecoders, MatchHfDecode) {
  const std::string data = BERTRT_TEST_DATA_DIR "/tokenizer/";
  std::ifstream in(data + "decoders.json");
  ASSERT_TRUE(in);
  const auto cases = nlohmann::json::parse(in);
  std::map<std::string, std::shared_ptr<Tokenizer>> built;
  size_t mismatches = 0;
  for (const auto& c : cases) {
    const std::string base = c["base"].get<std::string>();
    const std::string key = base + c["decoder"].dump();
    if (!built.count(key)) {
      std::ifstream f(data + base + "/tokenizer.json");
      auto spec = nlohmann::json::parse(f);
      spec["decoder"] = c["decoder"];
      auto t = Tokenizer::FromTokenizerJson(spec.dump());
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      built[key] = *t;
    }
    const std::string got = built[key]->Decode(c["ids"].get<std::vector<int32_t>>(),
                                               c["skip_special_tokens"].get<bool>());
    const std::string want = c["decoded"].get<std::string>();
    EXPECT_EQ(got, want) << key;
    mismatches += got != want;
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(cases.size(), 500u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PipelineGoldenTest,
                         ::testing::Values("xlmr", "roberta", "modernbert"));

}  // namespace
}  // namespace bertrt

// The component pipeline (Unigram, BPE): loading errors, decoding, and
// encoding time linear in the input. Exact parity with HF `tokenizers` is
// tests/tokenizer/test_pipeline_parity.py's job.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bertrt/tokenizer.h"
#include "tokenizer/utf8.h"

namespace bertrt {
namespace {

const std::string kData = BERTRT_TEST_DATA_DIR "/tokenizer/";

std::shared_ptr<Tokenizer> Load(const std::string& name) {
  auto t = Tokenizer::FromDirectory(kData + name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

StatusOr<std::shared_ptr<Tokenizer>> FromJson(const std::string& model,
                                              const std::string& rest = "") {
  return Tokenizer::FromTokenizerJson(R"({"model": )" + model + rest + "}");
}

TEST(PipelineTokenizerTest, LoadsTheCommittedShapes) {
  for (const char* name : {"xlmr", "roberta", "modernbert"}) {
    auto t = Load(name);
    ASSERT_NE(t, nullptr) << name;
    auto e = t->Encode("Hello world", std::string_view("a pair"));
    ASSERT_TRUE(e.ok()) << name << ": " << e.status().ToString();
    EXPECT_GT(e->input_ids.size(), 4u);
    EXPECT_EQ(e->special_tokens_mask.front(), 1);
    EXPECT_GE(t->pad_id(), 0) << name;
  }
}

TEST(PipelineTokenizerTest, DecodesBackToTheText) {
  const std::string text = "Hello world, naïve café 中文 😀!";
  for (const char* name : {"xlmr", "roberta", "modernbert"}) {
    auto t = Load(name);
    ASSERT_NE(t, nullptr);
    auto e = t->Encode(text);
    ASSERT_TRUE(e.ok());
    const std::string decoded = t->Decode(e->input_ids, /*skip_special_tokens=*/true);
    if (std::string(name) == "xlmr") {
      // Unigram maps chars it has no piece for to <unk>; the rest survives.
      EXPECT_EQ(decoded.rfind("Hello world", 0), 0u) << decoded;
    } else {
      EXPECT_EQ(decoded, text) << name;  // byte-level BPE is lossless
    }
  }
}

TEST(PipelineTokenizerTest, RefusesWhatItCannotRunExactly) {
  auto dropout = FromJson(R"({"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []})");
  ASSERT_FALSE(dropout.ok());
  EXPECT_EQ(dropout.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(dropout.status().message().find("dropout"), std::string::npos);
  EXPECT_TRUE(
      FromJson(R"({"type": "BPE", "dropout": null, "vocab": {"a": 0}, "merges": []})").ok());

  const std::pair<std::string, std::string> bad[] = {
      {R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]})", "not in the vocabulary"},
      {R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]})", "split by a space"},
      {R"({"type": "Unigram", "unk_id": 5, "vocab": [["a", -1.0]]})", "unk_id"},
      {R"({"type": "Unigram", "unk_id": 0, "vocab": [["a", "x"]]})", "malformed"},
  };
  for (const auto& [model, message] : bad) {
    auto t = FromJson(model);
    ASSERT_FALSE(t.ok()) << model;
    EXPECT_NE(t.status().message().find(message), std::string::npos) << t.status().ToString();
  }
  const std::string unigram = R"({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]})";
  const std::pair<std::string, std::string> bad_parts[] = {
      {R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated"})",
       "does not compile"},
      {R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})",
       "split behavior"},
      {R"(, "normalizer": {"type": "Precompiled", "precompiled_charsmap": "!!!"})", "base64"},
      {R"(, "normalizer": {"type": "Precompiled", "precompiled_charsmap": "/////w=="})",
       "trie size"},
      {R"(, "normalizer": {"type": "Uppercase"})", "not supported"},
      {R"(, "pre_tokenizer": {"type": "UnicodeScripts"})", "not supported"},
      {R"(, "pre_tokenizer": {"type": "FixedLength", "length": 0})", "positive"},
      {R"(, "pre_tokenizer": {"type": "Metaspace", "replacement": "ab"})", "one character"},
      {R"(, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "X"}}], "pair": [], "special_tokens": {"X": {"id": "X", "ids": [7], "tokens": ["X"]}}})",
       "not in the vocabulary"},
  };
  for (const auto& [part, message] : bad_parts) {
    auto t = FromJson(unigram, part);
    ASSERT_FALSE(t.ok()) << part;
    EXPECT_NE(t.status().message().find(message), std::string::npos) << t.status().ToString();
  }
}

TEST(PipelineTokenizerTest, UnknownCharWithoutUnkIsAnErrorNotACrash) {
  auto t = FromJson(R"({"type": "Unigram", "unk_id": null, "vocab": [["a", -1.0]]})");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE((*t)->Encode("aaa").ok());
  EXPECT_EQ((*t)->Encode("abc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*t)->Encode("a\xff").status().code(), StatusCode::kInvalidArgument);
}

TEST(PipelineTokenizerTest, SentencePieceModelAloneNamesTheConversion) {
  const std::string dir = ::testing::TempDir() + "/spm_only";
  std::filesystem::create_directories(dir);
  std::FILE* f = std::fopen((dir + "/sentencepiece.bpe.model").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  auto t = Tokenizer::FromDirectory(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("save_pretrained"), std::string::npos)
      << t.status().ToString();
}

// The server encodes from many threads with one tokenizer: the per-thread
// scratch buffers and BPE word caches must give every thread the same answer.
TEST(PipelineTokenizerTest, ThreadsAgree) {
  const std::vector<std::string> texts = {"Hello world, naïve café!", "中文 ภาษาไทย 😀 e\u0301",
                                          "  leading  and <mask> tokens\r\n", "don't WE'LL 123456"};
  for (const char* name : {"xlmr", "roberta", "modernbert"}) {
    auto t = Load(name);
    ASSERT_NE(t, nullptr);
    std::vector<Encoding> want;
    for (const std::string& text : texts) want.push_back(*t->Encode(text));
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) {
      threads.emplace_back([&, k] {
        for (int round = 0; round < 200; ++round) {
          const size_t i = static_cast<size_t>(k + round) % texts.size();
          auto e = t->Encode(texts[i]);
          if (!e.ok() || e->input_ids != want[i].input_ids || e->offsets != want[i].offsets) {
            ++mismatches;
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << name;
  }
}

// The fastest of three runs: the machine may be shared.
double SecondsToEncode(const Tokenizer& t, const std::string& text) {
  double best = 1e9;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    auto e = t.Encode(text);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// 1 MB of one repeated char must take about 4x what 256 KB takes: a Viterbi,
// merge or split loop gone quadratic would take 16x. The bound, 12x, leaves
// room for caches (a 1 MB word's merge state outgrows them).
TEST(PipelineTokenizerTest, OneMegabyteOfOneCharIsLinear) {
  const char32_t chars[] = {U'a', U' ', U'\u4e2d', U'\u0301', U'\U0001F600', U'\n', U'.', U'1'};
  for (const char* name : {"xlmr", "roberta", "modernbert"}) {
    auto t = Load(name);
    ASSERT_NE(t, nullptr);
    for (char32_t c : chars) {
      char buf[4];
      const std::string one(buf, tokenizer::AppendUtf8(c, buf));
      std::string quarter;
      while (quarter.size() < (256u << 10)) quarter += one;
      std::string full;
      for (int i = 0; i < 4; ++i) full += quarter;
      const double small = SecondsToEncode(*t, quarter);
      const double big = SecondsToEncode(*t, full);
      EXPECT_LT(big, 12 * small + 0.05)
          << name << " U+" << std::hex << static_cast<uint32_t>(c) << ": " << small
          << " s for 256 KB, " << big << " s for 1 MB";
      EXPECT_LT(big, 5.0) << name << " U+" << std::hex << static_cast<uint32_t>(c);
    }
  }
}

}  // namespace
}  // namespace bertrt

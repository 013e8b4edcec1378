#include "bertrt/tokenizer.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace bertrt {
namespace {

using Offsets = std::vector<std::pair<uint32_t, uint32_t>>;

const std::vector<std::string> kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff", "##able",
    ",",     "!",     "[",     "]",     "cls",   "中",    "国",    "cafe", "café", "i",
    "##̇",   "hi",    "a",     "b",     "c",     "Hello", "σας",  "ς",   "##s",  "x"};

std::shared_ptr<Tokenizer> Make(bool lowercase = true, std::optional<bool> strip = std::nullopt) {
  TokenizerSettings s;
  s.lowercase = lowercase;
  s.strip_accents = strip;
  auto t = Tokenizer::FromVocab(kVocab, s);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

std::vector<int32_t> Ids(const Tokenizer& t, std::string_view text) {
  auto e = t.Encode(text);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? e->input_ids : std::vector<int32_t>{};
}

TEST(TokenizerTest, WordPieceGreedyLongestMatch) {
  auto t = Make();
  EXPECT_EQ(Ids(*t, "unaffable"), (std::vector<int32_t>{2, 7, 8, 9, 3}));
  auto e = t->Encode("hello unaffable!");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->offsets, (Offsets{{0, 0}, {0, 5}, {6, 8}, {8, 11}, {11, 15}, {15, 16}, {0, 0}}));
  EXPECT_EQ(e->special_tokens_mask, (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(e->sequence_ids, (std::vector<int8_t>{-1, 0, 0, 0, 0, 0, -1}));
  // "hello", "un ##aff ##able", "!": HF's word ids.
  EXPECT_EQ(e->word_ids, (std::vector<int32_t>{-1, 0, 1, 1, 1, 2, -1}));
}

TEST(TokenizerTest, UnmatchablePieceMakesWholeWordUnk) {
  auto t = Make();
  auto e = t->Encode("unaffablez hi");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{2, 1, 21, 3}));
  EXPECT_EQ(e->offsets[1], (std::pair<uint32_t, uint32_t>{0, 10}));
}

TEST(TokenizerTest, LongWordIsUnk) {
  auto t = Make();
  EXPECT_EQ(Ids(*t, std::string(100, 'a')).size(), 3u);  // not in vocab either way
  TokenizerSettings s;
  s.max_input_chars_per_word = 3;
  auto short_words = *Tokenizer::FromVocab(kVocab, s);
  EXPECT_EQ(Ids(*short_words, "hello hi"), (std::vector<int32_t>{2, 1, 21, 3}));
}

TEST(TokenizerTest, NormalizerCleansControlsAndSpaces) {
  auto t = Make();
  // \0, U+FFFD, a control char and a zero-width space vanish; \t and NBSP split.
  auto e = t->Encode(std::string("he\x00llo\xef\xbf\xbd\x07\tworld\xc2\xa0hi\xe2\x80\x8b", 23));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{2, 5, 6, 21, 3}));
  EXPECT_EQ(e->offsets[1], (std::pair<uint32_t, uint32_t>{0, 6}));
  EXPECT_EQ(e->offsets[2], (std::pair<uint32_t, uint32_t>{9, 14}));
}

TEST(TokenizerTest, PunctuationIsIsolated) {
  auto t = Make();
  EXPECT_EQ(Ids(*t, "hello,world!"), (std::vector<int32_t>{2, 5, 10, 6, 11, 3}));
  // '[' and ']' are ASCII punctuation; "[cls]" is not the special token.
  EXPECT_EQ(Ids(*t, "[cls]"), (std::vector<int32_t>{2, 12, 14, 13, 3}));
}

TEST(TokenizerTest, SpecialTokensInTextAreMatchedBeforeNormalizing) {
  auto t = Make();
  auto e = t->Encode("hi[CLS]hi [MASK]");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{2, 21, 2, 21, 4, 3}));
  EXPECT_EQ(e->offsets[2], (std::pair<uint32_t, uint32_t>{2, 7}));
  EXPECT_EQ(e->special_tokens_mask[2], 0);  // only post-processor tokens are marked
}

TEST(TokenizerTest, CjkCharsAreSeparateWords) {
  auto t = Make();
  auto e = t->Encode("中国hi");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{2, 15, 16, 21, 3}));
  EXPECT_EQ(e->offsets, (Offsets{{0, 0}, {0, 1}, {1, 2}, {2, 4}, {0, 0}}));
}

TEST(TokenizerTest, AccentsFollowLowercaseUnlessSet) {
  EXPECT_EQ(Ids(*Make(true), "CAFÉ"), (std::vector<int32_t>{2, 17, 3}));
  EXPECT_EQ(Ids(*Make(true, false), "CAFÉ"), (std::vector<int32_t>{2, 18, 3}));
  EXPECT_EQ(Ids(*Make(false), "café"), (std::vector<int32_t>{2, 18, 3}));
  EXPECT_EQ(Ids(*Make(false, true), "café"), (std::vector<int32_t>{2, 17, 3}));
  // A stripped combining accent leaves no trace in the offsets (as in HF).
  auto e = Make(true)->Encode("cafe\xcc\x81!");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->offsets[1], (std::pair<uint32_t, uint32_t>{0, 4}));
  EXPECT_EQ(e->offsets[2], (std::pair<uint32_t, uint32_t>{5, 6}));
}

TEST(TokenizerTest, FullUnicodeLowercase) {
  // İ lowercases to "i" + U+0307 without accent stripping; both map to İ.
  auto e = Make(true, false)->Encode("İ");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{2, 19, 20, 3}));
  EXPECT_EQ(e->offsets, (Offsets{{0, 0}, {0, 1}, {0, 1}, {0, 0}}));
  // Σ lowercases to σ (char-wise, no final sigma).
  EXPECT_EQ(Ids(*Make(true, false), "ΣΑΣ").size(), 3u);
  EXPECT_EQ(Ids(*Make(false), "Hello"), (std::vector<int32_t>{2, 25, 3}));
}

TEST(TokenizerTest, InvalidUtf8NamesOffsetAndText) {
  auto t = Make();
  auto e = t->Encode("hello \xff world");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("text at byte offset 6"), std::string::npos)
      << e.status().message();
  auto p = t->Encode("hello", std::string_view("ab\xe4\xb8", 4));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("text_pair at byte offset 2"), std::string::npos);
  // Overlong encodings and surrogates are invalid too.
  EXPECT_FALSE(t->Encode("\xc0\xaf").ok());
  EXPECT_FALSE(t->Encode("\xed\xa0\x80").ok());
}

TEST(TokenizerTest, PairTypeIds) {
  auto t = Make();
  auto e = t->Encode("hello", std::string_view("world hi"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{2, 5, 3, 6, 21, 3}));
  EXPECT_EQ(e->token_type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(e->sequence_ids, (std::vector<int8_t>{-1, 0, -1, 1, 1, -1}));
  EXPECT_EQ(e->word_ids, (std::vector<int32_t>{-1, 0, -1, 0, 1, -1}));  // each text counts its own
  EXPECT_EQ(e->offsets[4], (std::pair<uint32_t, uint32_t>{6, 8}));
}

TEST(TokenizerTest, TruncationStrategies) {
  auto t = Make();
  const std::string a = "a b c a b c";  // 6 tokens
  const std::string b = "hi hi";        // 2 tokens
  auto len = [&](size_t max, Truncation s, bool pair = true) {
    auto e = pair ? t->Encode(a, std::string_view(b), max, s) : t->Encode(a, std::nullopt, max, s);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? e->input_ids.size() : 0;
  };
  EXPECT_EQ(len(0, Truncation::kLongestFirst), 11u);
  EXPECT_EQ(len(8, Truncation::kLongestFirst), 8u);
  EXPECT_EQ(len(5, Truncation::kLongestFirst, false), 5u);
  // Longest first: the shorter pair text is kept whole while the longer absorbs the cut.
  auto e = t->Encode(a, std::string_view(b), 8, Truncation::kLongestFirst);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->token_type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 1}));
  // Budget 2 split evenly.
  e = t->Encode(a, std::string_view(b), 5, Truncation::kLongestFirst);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->token_type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(len(9, Truncation::kOnlyFirst), 9u);
  e = t->Encode(b, std::string_view(a), 7, Truncation::kOnlySecond);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{2, 21, 21, 3, 22, 23, 3}));
  // As HF: max_length == number of special tokens empties both texts, and
  // below it nothing is truncated.
  EXPECT_EQ(len(3, Truncation::kOnlyFirst), 3u);
  EXPECT_EQ(len(2, Truncation::kLongestFirst), 11u);
}

// The server cuts an input it has already encoded (TruncateEncoding) rather
// than tokenizing it again with max_length: both must give the same
// encoding, or the same error, for every strategy and length; cut from the
// start, each text keeps as many tokens, its last ones.
TEST(TokenizerTest, TruncatingAnEncodingMatchesEncodingWithMaxLength) {
  const std::string data = BERTRT_TEST_DATA_DIR "/tokenizer/";
  std::vector<std::shared_ptr<Tokenizer>> tokenizers = {Make()};
  for (const char* dir : {"roberta", "xlmr", "cased"}) {  // BPE with </s></s>, Unigram, WordPiece
    auto t = Tokenizer::FromDirectory(data + dir);
    ASSERT_TRUE(t.ok()) << dir << ": " << t.status().ToString();
    tokenizers.push_back(*t);
  }
  const std::pair<std::string, std::optional<std::string>> inputs[] = {
      {"a b c a b c hello world", std::nullopt},
      {"hello", std::string("a b c a b c")},
      {"a b c a b c", std::string("hi hi")},
      {"unaffable hello, world!", std::string("中国 cafe")}};
  for (const auto& t : tokenizers)
    for (const auto& [text, pair] : inputs) {
      const std::optional<std::string_view> pair_view =
          pair ? std::optional<std::string_view>(*pair) : std::nullopt;
      auto full = t->Encode(text, pair_view);
      ASSERT_TRUE(full.ok()) << full.status().ToString();
      const size_t n = full->input_ids.size();
      for (Truncation strategy :
           {Truncation::kLongestFirst, Truncation::kOnlyFirst, Truncation::kOnlySecond})
        for (size_t limit = 0; limit <= n + 1; ++limit) {
          const std::string where = text + " | " + pair.value_or("-") + " at " +
                                    std::to_string(limit) + " " + TruncationName(strategy);
          auto want = t->Encode(text, pair_view, limit, strategy);
          auto right = TruncateEncoding(*full, pair.has_value(), limit, strategy);
          auto left = TruncateEncoding(*full, pair.has_value(), limit, strategy, true);
          ASSERT_EQ(right.ok(), want.ok()) << where;
          ASSERT_EQ(left.ok(), want.ok()) << where;
          if (!want.ok()) {
            EXPECT_EQ(right.status().message(), want.status().message()) << where;
            continue;
          }
          EXPECT_EQ(right->input_ids, want->input_ids) << where;
          EXPECT_EQ(right->token_type_ids, want->token_type_ids) << where;
          EXPECT_EQ(right->offsets, want->offsets) << where;
          EXPECT_EQ(right->special_tokens_mask, want->special_tokens_mask) << where;
          EXPECT_EQ(right->sequence_ids, want->sequence_ids) << where;
          EXPECT_EQ(right->word_ids, want->word_ids) << where;
          EXPECT_EQ(left->sequence_ids, want->sequence_ids) << where;
          EXPECT_EQ(left->token_type_ids, want->token_type_ids) << where;
          for (int8_t s : {0, 1}) {
            std::vector<int32_t> all, kept;
            for (size_t i = 0; i < n; ++i)
              if (full->sequence_ids[i] == s) all.push_back(full->input_ids[i]);
            for (size_t i = 0; i < left->input_ids.size(); ++i)
              if (left->sequence_ids[i] == s) kept.push_back(left->input_ids[i]);
            EXPECT_EQ(kept, std::vector<int32_t>(all.end() - kept.size(), all.end())) << where;
          }
        }
    }
}

// HF's return_overflowing_tokens with a stride: windows of the cut text
// that each start `stride` tokens before the previous one ended.
TEST(TokenizerTest, OverflowWindowsAsHfGivesThem) {
  auto t = Make();
  // "a b c a b c x" is 7 tokens: 9 with [CLS] and [SEP].
  auto full = t->Encode("a b c a b c x");
  ASSERT_TRUE(full.ok());
  auto windows = OverflowWindows(*full, false, 6, 1, Truncation::kLongestFirst);
  ASSERT_TRUE(windows.ok()) << windows.status().ToString();
  // 4 text tokens a window, starting 3 apart: [0, 4), [3, 7).
  ASSERT_EQ(windows->size(), 2u);
  EXPECT_EQ((*windows)[0].input_ids, (std::vector<int32_t>{2, 22, 23, 24, 22, 3}));
  EXPECT_EQ((*windows)[1].input_ids, (std::vector<int32_t>{2, 22, 23, 24, 29, 3}));
  EXPECT_EQ((*windows)[1].offsets[1], (std::pair<uint32_t, uint32_t>{6, 7}));
  EXPECT_EQ((*windows)[1].word_ids, (std::vector<int32_t>{-1, 3, 4, 5, 6, -1}));
  // Fits: itself.
  auto one = OverflowWindows(*full, false, 9, 4, Truncation::kLongestFirst);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].input_ids, full->input_ids);

  // A pair: the question whole in each window, the context in windows.
  auto pair = t->Encode("hi", std::string_view("a b c a b c x"));
  ASSERT_TRUE(pair.ok());
  auto qa = OverflowWindows(*pair, true, 8, 2, Truncation::kOnlySecond);
  ASSERT_TRUE(qa.ok()) << qa.status().ToString();
  // 8 - 3 special - 1 question token: 4 context tokens a window, 2 apart:
  // [0, 4), [2, 6), [4, 7).
  ASSERT_EQ(qa->size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    const Encoding& w = (*qa)[i];
    EXPECT_EQ(w.input_ids.size(), 8u);
    EXPECT_EQ(w.input_ids[1], 21);
    EXPECT_EQ(w.sequence_ids, (std::vector<int8_t>{-1, 0, -1, 1, 1, 1, 1, -1}));
  }
  EXPECT_EQ((*qa)[1].input_ids[3], 24);  // context token 2 ("c") starts the second
  EXPECT_EQ((*qa)[2].input_ids, (std::vector<int32_t>{2, 21, 3, 23, 24, 29, 3}));

  // What cannot be: no room for the context, a stride as long as a window,
  // longest_first over a pair, more windows than allowed.
  EXPECT_EQ(OverflowWindows(*pair, true, 4, 0, Truncation::kOnlySecond).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OverflowWindows(*full, false, 6, 4, Truncation::kLongestFirst).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OverflowWindows(*pair, true, 8, 2, Truncation::kLongestFirst).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OverflowWindows(*full, false, 4, 1, Truncation::kLongestFirst, 2).status().code(),
            StatusCode::kResourceExhausted);
}

TEST(TokenizerTest, ImpossibleTruncationIsAnError) {
  auto t = Make();
  auto e = t->Encode("hi", std::string_view("a b c a b c"), 6, Truncation::kOnlyFirst);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(t->Encode("a b c", std::nullopt, 4, Truncation::kOnlySecond).ok());
  EXPECT_TRUE(t->Encode("a b", std::nullopt, 4, Truncation::kOnlySecond).ok());  // fits
}

TEST(TokenizerTest, ParseTruncation) {
  EXPECT_EQ(*ParseTruncation("only_second"), Truncation::kOnlySecond);
  EXPECT_FALSE(ParseTruncation("longest").ok());
  EXPECT_STREQ(TruncationName(Truncation::kOnlyFirst), "only_first");
}

TEST(TokenizerTest, VocabularyAccessors) {
  auto t = Make();
  EXPECT_EQ(t->vocab_size(), kVocab.size());
  EXPECT_EQ(t->TokenToId("hello"), 5);
  EXPECT_EQ(t->TokenToId("nope"), -1);
  EXPECT_EQ(t->IdToToken(6), "world");
  EXPECT_EQ(t->IdToToken(-1), "");
  EXPECT_EQ(t->pad_id(), 0);
  EXPECT_EQ(t->Vocabulary(), kVocab);
}

TEST(TokenizerTest, LoadsCommittedDirectories) {
  const std::string data = BERTRT_TEST_DATA_DIR "/tokenizer/";
  auto json = Tokenizer::FromDirectory(data + "cased");
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  auto vocab = Tokenizer::FromDirectory(data + "vocab_only");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_FALSE((*json)->settings().lowercase);
  EXPECT_FALSE((*vocab)->settings().lowercase);
  for (const char* text : {"Hello World İstanbul Straße 中国", "[CLS] x [MASK]"}) {
    auto a = (*json)->Encode(text);
    auto b = (*vocab)->Encode(text);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->input_ids, b->input_ids);
    EXPECT_EQ(a->offsets, b->offsets);
  }
  EXPECT_NE((*json)->TokenToId("Hello"), (*json)->TokenToId("hello"));
}

TEST(TokenizerTest, LoadingErrors) {
  auto missing = Tokenizer::FromDirectory(BERTRT_TEST_DATA_DIR "/no_such_dir");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Tokenizer::FromTokenizerJson("{not json").status().code(),
            StatusCode::kInvalidArgument);
  auto word_level = Tokenizer::FromTokenizerJson(
      R"({"model": {"type": "WordLevel", "vocab": {}, "unk_token": "x"}, "normalizer": null,
          "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": []})");
  ASSERT_FALSE(word_level.ok());
  EXPECT_EQ(word_level.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(word_level.status().message().find("WordPiece, Unigram and BPE"), std::string::npos);
  auto wrong_types = Tokenizer::FromTokenizerJson(
      R"({"model": {"type": "WordPiece", "vocab": {"a": "x"}}, "pre_tokenizer": {"type": "BertPreTokenizer"}})");
  EXPECT_EQ(wrong_types.status().code(), StatusCode::kInvalidArgument);
  auto no_unk = Tokenizer::FromTokenizerJson(
      R"({"model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "[UNK]"},
          "pre_tokenizer": {"type": "BertPreTokenizer"}, "normalizer": null})");
  EXPECT_FALSE(no_unk.ok());
  auto no_cls = Tokenizer::FromVocab({"[UNK]", "a"}, TokenizerSettings{});
  EXPECT_FALSE(no_cls.ok());
}

TEST(TokenizerTest, DefaultModelIfPresent) {
  const char* env = std::getenv("BERTRT_DEFAULT_MODEL_DIR");
  const std::string dir = env ? env : "models/all-MiniLM-L6-v2";
  auto t = Tokenizer::FromDirectory(dir);
  if (!t.ok()) GTEST_SKIP() << "default model not found at " << dir;
  auto e = (*t)->Encode("Hello, world!");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->input_ids, (std::vector<int32_t>{101, 7592, 1010, 2088, 999, 102}));
}

}  // namespace
}  // namespace bertrt

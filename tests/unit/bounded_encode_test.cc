// Encoding within EncodeLimits (tokenizer/bounded_encoder.h): a long text
// read in pieces, only as far as the limits need, gives exactly what its
// whole encoding cut by TruncateEncoding gives (or refused, the same
// refusal), for every tokenizer in tests/data and variants that reach each
// component's cut rule; a 6 MB text cut to 512 tokens costs memory on the
// scale of those 512 tokens; and a long text leaves no memory behind.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bertrt/tokenizer.h"
#include "tokenizer/bounded_encoder.h"

// Heap use, counted while a test asks: the bound tests compare what two
// encodings allocate. Every operator new of the binary comes here.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_total{0};

void* Counted(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  if (g_counting.load(std::memory_order_relaxed)) {
    const auto n = static_cast<int64_t>(malloc_usable_size(p));
    g_total += n;
    const int64_t live = g_live += n;
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
  }
  return p;
}
void Uncounted(void* p) {
  if (p != nullptr && g_counting.load(std::memory_order_relaxed))
    g_live -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return Counted(std::malloc(n)); }
void* operator new[](size_t n) { return Counted(std::malloc(n)); }
void operator delete(void* p) noexcept { Uncounted(p); }
void operator delete[](void* p) noexcept { Uncounted(p); }
void operator delete(void* p, size_t) noexcept { Uncounted(p); }
void operator delete[](void* p, size_t) noexcept { Uncounted(p); }

namespace bertrt {
namespace {

using nlohmann::json;
using tokenizer::BoundedTuning;
using tokenizer::EncodeWithin;
using tokenizer::PieceEncoder;

const std::string kData = BERTRT_TEST_DATA_DIR;

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Named {
  std::string name;
  std::shared_ptr<Tokenizer> tok;
};

std::shared_ptr<Tokenizer> FromJson(const json& j) {
  auto t = Tokenizer::FromTokenizerJson(j.dump());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

json Added(const std::string& content, bool normalized, bool lstrip, bool rstrip,
           bool single_word) {
  return {{"id", 0},          {"content", content}, {"normalized", normalized},
          {"lstrip", lstrip}, {"rstrip", rstrip},   {"single_word", single_word},
          {"special", false}};
}

// Every distinct tokenizer of tests/data, and variants that switch on the
// components and options the cut rules treat apart (or cannot cut at all).
std::vector<Named> Tokenizers() {
  std::vector<Named> out;
  std::map<std::string, bool> seen;
  auto add_dir = [&](const std::filesystem::path& dir) {
    const std::string key = Read(dir / "tokenizer.json") + Read(dir / "vocab.txt") +
                            Read(dir / "tokenizer_config.json");
    if (seen[key]) return;
    seen[key] = true;
    auto t = Tokenizer::FromDirectory(dir.string());
    ASSERT_TRUE(t.ok()) << dir << ": " << t.status().ToString();
    out.push_back({dir.parent_path().filename().string() + "/" + dir.filename().string(), *t});
  };
  for (const char* name : {"cased", "vocab_only", "xlmr", "roberta", "modernbert"})
    add_dir(kData + "/tokenizer/" + name);
  std::vector<std::filesystem::path> models;
  for (const auto& e : std::filesystem::directory_iterator(kData + "/models"))
    if (e.is_directory()) models.push_back(e.path());
  std::sort(models.begin(), models.end());
  for (const auto& dir : models)
    if (std::filesystem::exists(dir / "tokenizer.json") ||
        std::filesystem::exists(dir / "vocab.txt"))
      add_dir(dir);

  const json xlmr = json::parse(Read(kData + "/tokenizer/xlmr/tokenizer.json"));
  const json roberta = json::parse(Read(kData + "/tokenizer/roberta/tokenizer.json"));
  const json modernbert = json::parse(Read(kData + "/tokenizer/modernbert/tokenizer.json"));
  const json cased = json::parse(Read(kData + "/tokenizer/cased/tokenizer.json"));
  auto variant = [&](const std::string& name, json j) { out.push_back({name, FromJson(j)}); };

  json j = xlmr;
  j["pre_tokenizer"]["prepend_scheme"] = "first";
  j["added_tokens"].push_back(Added("ab", true, true, true, true));
  j["model"]["byte_fallback"] = true;
  variant("xlmr first, normalized added token, byte_fallback", j);
  j = xlmr;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "NFKD"}},
                       {{"type", "Lowercase"}},
                       {{"type", "StripAccents"}},
                       {{"type", "Nmt"}},
                       {{"type", "Replace"}, {"pattern", {{"String", "``"}}}, {"content", "\""}}}}};
  variant("xlmr NFKD, Lowercase, StripAccents, Nmt, Replace", j);
  j = xlmr;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "NFKC"}},
                       {{"type", "Lowercase"}},
                       {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}}}};
  variant("xlmr NFKC, Replace \\s+ (no normalizer cut)", j);
  j = xlmr;
  j["normalizer"]["normalizers"].push_back({{"type", "Strip"}});
  j["pre_tokenizer"]["split"] = false;
  variant("xlmr Strip, unsplit Metaspace (no cut)", j);
  j = roberta;
  j["pre_tokenizer"]["add_prefix_space"] = true;
  j["post_processor"]["add_prefix_space"] = true;
  j["added_tokens"].push_back(Added(" x y", false, false, true, false));
  variant("roberta add_prefix_space, added token with a space", j);
  j = modernbert;
  j["added_tokens"].push_back(Added("ab", true, true, true, true));
  j["added_tokens"].push_back(Added("q z", true, false, false, false));
  variant("modernbert normalized added tokens", j);
  j = modernbert;
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  variant("modernbert NFC, split merged with previous (no encoder cut)", j);
  j = cased;
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  variant("cased pipeline WordPiece, Whitespace", j);
  j = cased;
  j["normalizer"]["lowercase"] = true;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Punctuation"}, {"behavior", "MergedWithNext"}},
                          {{"type", "WhitespaceSplit"}},
                          {{"type", "Digits"}, {"individual_digits", true}}}}};
  variant("cased pipeline WordPiece, Punctuation, WhitespaceSplit, Digits", j);
  j = cased;
  j["normalizer"]["strip_accents"] = true;
  j["added_tokens"].push_back(Added("xyz", true, true, true, false));
  j["added_tokens"].push_back(Added("ab", false, false, false, true));
  variant("cased fused, strip_accents, added tokens", j);
  return out;
}

// Fragments of text that reach the cut rules' cases: whitespace of every
// kind, CJK, combining marks, U+FDFA (18 chars under NFKC), emoji with
// modifiers and joiners, Hangul jamo that compose, a Prepend char, control
// chars, and the added and special tokens of the tokenizers above.
// clang-format off: a table
const std::vector<std::string> kFragments = {"the",
                                             "quick",
                                             "brown",
                                             "fox",
                                             "jumps",
                                             "unaffable",
                                             "naïve",
                                             "café",
                                             "e\u0301",
                                             "\u0316\u0301",
                                             "a\u0308",
                                             "中文",
                                             "今天天气",
                                             "\ufdfa",
                                             "😀",
                                             "👍🏽",
                                             "👨‍👩‍👧",
                                             "🇫🇷",
                                             ",",
                                             ".",
                                             "!",
                                             "'s",
                                             "'t",
                                             "123",
                                             "4567",
                                             " ",
                                             "  ",
                                             "   ",
                                             "\t",
                                             "\n",
                                             "\r\n",
                                             "\u3000",
                                             "\u00a0",
                                             "\u2003",
                                             "\x01",
                                             "\u200b",
                                             "[CLS]",
                                             "[MASK]",
                                             "[SEP]",
                                             "<mask>",
                                             "<s>",
                                             "</s>",
                                             "ab",
                                             "xyz",
                                             " x y",
                                             "q z",
                                             "``",
                                             "ÅΣσς",
                                             "İ",
                                             "ß",
                                             "ﬁ",
                                             "①",
                                             "\u1100\u1161\u11a8",
                                             "\u0600",
                                             "\u0915\u094d\u0937",
                                             "\ufeff",
                                             "hello",
                                             "world",
                                             "▁",
                                             "\u0120"};
// clang-format on

std::string RandomText(std::mt19937& rng, size_t fragments) {
  std::string s;
  std::uniform_int_distribution<size_t> pick(0, kFragments.size() - 1);
  std::uniform_int_distribution<int> sep(0, 3);
  for (size_t i = 0; i < fragments; ++i) {
    s += kFragments[pick(rng)];
    if (sep(rng) != 0) s += ' ';
  }
  return s;
}

// What Encode(limits) must give: the whole encoding, cut or refused.
struct Expected {
  StatusOr<Encoding> enc;
  bool too_long = false;
  size_t tokens = 0;
  size_t first_text_cut = 0;
  bool cut_start = false;  // truncated from the left
  bool truncated = false;  // EncodeReport::truncated
};

Expected Reference(const Encoding& full, bool is_pair, const EncodeLimits& limits) {
  const size_t n = full.input_ids.size();
  if (!limits.truncate) {
    if (limits.max_length > 0 && n > limits.max_length) return {OutOfRange("too long"), true, n, 0};
    return {full};
  }
  Expected e{
      TruncateEncoding(full, is_pair, limits.max_length, limits.truncation, limits.truncate_left)};
  e.cut_start = limits.truncate_left;
  e.truncated = e.enc.ok() && e.enc->input_ids.size() < n;
  if (e.enc.ok() && limits.truncate_left) {
    size_t all = 0, kept = 0;
    for (int8_t s : full.sequence_ids) all += s == 0;
    for (int8_t s : e.enc->sequence_ids) kept += s == 0;
    e.first_text_cut = std::min(all - kept, limits.count_first_text_cut_up_to);
  }
  return e;
}

void ExpectSame(const Expected& want, const StatusOr<Encoding>& got, const EncodeReport& report,
                const std::string& where) {
  ASSERT_EQ(got.ok(), want.enc.ok())
      << where << ": " << got.status().ToString() << " / " << want.enc.status().ToString();
  EXPECT_EQ(report.too_long, want.too_long) << where;
  if (!got.ok()) {
    EXPECT_EQ(got.status().code(), want.enc.status().code()) << where;
    if (report.too_long && report.exact) EXPECT_EQ(report.tokens, want.tokens) << where;
    if (report.too_long && !report.exact) EXPECT_LT(report.tokens, want.tokens + 1) << where;
    return;
  }
  // The first token that differs, for a message that shows where.
  const Encoding& a = *got;
  const Encoding& b = *want.enc;
  size_t i = 0;
  while (i < a.input_ids.size() && i < b.input_ids.size() && a.input_ids[i] == b.input_ids[i] &&
         a.offsets[i] == b.offsets[i] && a.token_type_ids[i] == b.token_type_ids[i] &&
         a.special_tokens_mask[i] == b.special_tokens_mask[i] &&
         a.sequence_ids[i] == b.sequence_ids[i])
    ++i;
  if (i < a.input_ids.size() || i < b.input_ids.size()) {
    auto at = [&](const Encoding& e) {
      if (i >= e.input_ids.size()) return std::string("(none)");
      return std::to_string(e.input_ids[i]) + " [" + std::to_string(e.offsets[i].first) + ", " +
             std::to_string(e.offsets[i].second) + ") seq " + std::to_string(e.sequence_ids[i]);
    };
    ADD_FAILURE() << where << ": token " << i << " of " << a.input_ids.size() << "/"
                  << b.input_ids.size() << " is " << at(a) << ", expected " << at(b);
  }
  EXPECT_EQ(report.first_text_cut, want.first_text_cut) << where;
  EXPECT_EQ(report.truncated, want.truncated) << where;
  if (i < a.input_ids.size() || i < b.input_ids.size()) return;
  // Word ids: exact, except that where a text's start was cut and not read
  // they count from the first word kept (Encoding::word_ids), so compare
  // each text's ids relative to its first token's.
  auto relative = [](const Encoding& e) {
    std::vector<int32_t> out(e.word_ids.size(), -1);
    int32_t first[2] = {-1, -1};
    for (size_t k = 0; k < e.word_ids.size(); ++k) {
      const int8_t s = e.sequence_ids[k];
      if (s < 0) continue;
      if (first[s] < 0) first[s] = e.word_ids[k];
      out[k] = e.word_ids[k] - first[s];
    }
    return out;
  };
  EXPECT_EQ(relative(a), relative(b)) << where;
  if (!want.cut_start) EXPECT_EQ(a.word_ids, b.word_ids) << where;
}

TEST(BoundedEncodeTest, PiecesGiveTheWholeTextsEncodingCut) {
  std::mt19937 rng(44);
  const BoundedTuning whole{SIZE_MAX, 1024};
  for (const Named& t : Tokenizers()) {
    ASSERT_NE(t.tok, nullptr) << t.name;
    const auto& enc = dynamic_cast<const PieceEncoder&>(*t.tok);
    for (int round = 0; round < 6; ++round) {
      const std::string text = RandomText(rng, 300 + rng() % 1500);
      const std::string pair_text = round == 5 ? text : RandomText(rng, 200 + rng() % 800);
      const bool is_pair = round >= 3;
      const std::optional<std::string_view> pair =
          is_pair ? std::optional<std::string_view>(pair_text) : std::nullopt;
      const auto full = EncodeWithin(enc, text, pair, EncodeLimits{}, nullptr, whole);
      ASSERT_TRUE(full.ok()) << t.name << ": " << full.status().ToString();
      // Small first chunks make many pieces, and cuts at every kind of place.
      const BoundedTuning pieces{0, 1 + rng() % 96};
      for (size_t max_length : {size_t{2}, size_t{9}, size_t{61}, size_t{512}, size_t{0}})
        for (int mode = 0; mode < 7; ++mode) {
          EncodeLimits limits;
          limits.max_length = max_length;
          limits.truncate = mode > 0;
          limits.truncate_left = mode > 3;
          limits.truncation = static_cast<Truncation>((mode + 2) % 3);
          limits.count_first_text_cut_up_to = mode % 3 == 0 ? 3 : 0;
          const std::string where = t.name + " round " + std::to_string(round) + " max_length " +
                                    std::to_string(max_length) + " mode " + std::to_string(mode) +
                                    " chunk " + std::to_string(pieces.first_chunk_chars);
          EncodeReport report;
          const auto got = EncodeWithin(enc, text, pair, limits, &report, pieces);
          ExpectSame(Reference(*full, is_pair, limits), got, report, where);
          if (HasFatalFailure()) return;
        }
    }
  }
}

// The public Encode takes pieces past 16 KB, with the product's chunks.
TEST(BoundedEncodeTest, EncodeReadsALongTextInPiecesWithTheSameResult) {
  std::mt19937 rng(7);
  const std::string text = RandomText(rng, 12000);
  ASSERT_GT(text.size(), BoundedTuning{}.whole_text_bytes);
  for (const char* name : {"vocab_only", "xlmr", "roberta", "modernbert"}) {
    auto tok = Tokenizer::FromDirectory(kData + "/tokenizer/" + name);
    ASSERT_TRUE(tok.ok());
    const auto full = EncodeWithin(dynamic_cast<const PieceEncoder&>(**tok), text, std::nullopt,
                                   EncodeLimits{}, nullptr, {SIZE_MAX, 1024});
    ASSERT_TRUE(full.ok());
    for (bool left : {false, true}) {
      EncodeLimits limits;
      limits.max_length = 512;
      limits.truncate_left = left;
      EncodeReport report;
      ExpectSame(Reference(*full, false, limits),
                 (*tok)->Encode(text, std::nullopt, limits, &report), report, name);
    }
  }
}

TEST(BoundedEncodeTest, RefusalsSayWhatWasWrong) {
  auto tok = Tokenizer::FromDirectory(kData + "/tokenizer/vocab_only");
  ASSERT_TRUE(tok.ok());
  const std::string text(1 << 20, 'a');  // one word: nowhere to cut it
  EncodeLimits limits;
  limits.max_length = 512;
  limits.max_normalized_chars = 100000;
  EncodeReport report;
  auto e = (*tok)->Encode(text, std::nullopt, limits, &report);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(report.too_long);
  EXPECT_NE(e.status().message().find("100000"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("--max-normalized-chars"), std::string::npos);
  // Cut where it can be, the same text is cut to the budget.
  std::string words;
  for (int i = 0; i < 100000; ++i) words += "word ";
  e = (*tok)->Encode(words, std::nullopt, limits, &report);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->input_ids.size(), 512u);
  // Refused for its length, it says so without reading it all.
  limits.truncate = false;
  e = (*tok)->Encode(words, std::nullopt, limits, &report);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(report.too_long);
  EXPECT_FALSE(report.exact);
  EXPECT_EQ(e.status().code(), StatusCode::kOutOfRange);
  // Invalid UTF-8 past what is read is still an error, as it is whole.
  words += "\xff";
  limits.truncate = true;
  e = (*tok)->Encode(words, std::nullopt, limits, &report);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "invalid UTF-8 in text at byte offset 500000");
}

struct Heap {
  int64_t peak;
  int64_t total;
};

// The heap a call allocates: its peak over what was live before, and all
// it allocated.
template <typename F>
Heap Measure(F&& f) {
  g_live = 0;
  g_peak = 0;
  g_total = 0;
  g_counting = true;
  f();
  g_counting = false;
  return {g_peak.load(), g_total.load()};
}

// D5 of issue 44: a 6 MB text with truncate took hundreds of MB. Now the
// text costs what its first KB cost: compared here with its first 64 KB
// (already read in pieces, and far more than 512 tokens need).
TEST(BoundedEncodeTest, AHugeTextCutToTheLimitCostsWhatTheLimitNeeds) {
  struct Case {
    const char* tokenizer;
    std::string unit;  // repeated to 6 MB
  };
  const Case cases[] = {{"vocab_only", "lorem ipsum dolor sit amet, consectetur "},
                        {"xlmr", "\ufdfa"},
                        {"roberta", "lorem ipsum dolor sit amet, consectetur "},
                        {"modernbert", "今天天气很好 "}};
  for (const Case& c : cases) {
    auto tok = Tokenizer::FromDirectory(kData + "/tokenizer/" + c.tokenizer);
    ASSERT_TRUE(tok.ok());
    std::string base, huge;
    while (base.size() < (64 << 10)) base += c.unit;
    while (huge.size() < (6 << 20)) huge += base;
    for (bool truncate : {true, false})
      for (bool left : {false, true}) {
        EncodeLimits limits;
        limits.max_length = 512;
        limits.truncate = truncate;
        limits.truncate_left = left;
        limits.max_normalized_chars = 1'000'000;
        auto run = [&](const std::string& text) {
          return Measure([&] {
            auto e = (*tok)->Encode(text, std::nullopt, limits);
            EXPECT_EQ(e.ok(), truncate) << e.status().ToString();
          });
        };
        run(base);  // the thread's buffers as the first call leaves them
        const Heap small = run(base);
        const Heap large = run(huge);
        const std::string where =
            std::string(c.tokenizer) + (truncate ? " truncate" : " refuse") + (left ? " left" : "");
        EXPECT_LT(large.peak, 2 * small.peak + (64 << 10)) << where;
        EXPECT_LT(large.total, 2 * small.total + (64 << 10)) << where;
      }
  }
}

// Memory kept after a long text: the thread's buffers give back what it
// made them hold (the whole path, with no token limit, reads all of it).
TEST(BoundedEncodeTest, ALongTextLeavesNoMemoryBehind) {
  for (const char* name : {"vocab_only", "xlmr", "modernbert"}) {
    auto tok = Tokenizer::FromDirectory(kData + "/tokenizer/" + name);
    ASSERT_TRUE(tok.ok());
    ASSERT_TRUE((*tok)->Encode("its tables: ü 中 \ufdfa 😀").ok());
    std::string text;
    while (text.size() < (1 << 20)) text += "lorem ipsum dolor sit amet consectetur ";
    const std::string word(300000, 'x');  // one long word through the model
    for (const std::string* t : {&std::as_const(text), &word}) {
      int64_t live = 0;
      const Heap h = Measure([&] {
        auto e = (*tok)->Encode(*t);
        EXPECT_TRUE(e.ok());
        e = StatusOr<Encoding>(Encoding{});
        live = g_live.load();
      });
      EXPECT_GT(h.peak, 2 << 20) << name;                                    // it did take memory
      EXPECT_LT(live, 1 << 20) << name << (t == &word ? " word" : " text");  // and kept little
    }
  }
}

}  // namespace
}  // namespace bertrt

// libFuzzer target for encoding with the component pipeline: arbitrary bytes
// as text / text_pair / max_length / strategy through the committed XLM-R
// (Unigram, Precompiled charsmap, Metaspace), RoBERTa (byte-level BPE,
// offset trimming) and ModernBERT (Split regex + ByteLevel) tokenizers and
// variants that switch on NFKC, byte_fallback and added tokens. Nothing may
// crash, hang or trip the sanitizers; offsets must stay within the text;
// read in pieces under limits, a text must encode as it does whole.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/tokenizer.h"
#include "bounded_check.h"

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::shared_ptr<bertrt::Tokenizer>> MakeTokenizers() {
  std::vector<std::shared_ptr<bertrt::Tokenizer>> out;
  const std::string dir = BERTRT_TEST_DATA_DIR "/tokenizer/";
  for (const char* name : {"xlmr", "roberta", "modernbert"}) {
    const std::string text = Read(dir + name + "/tokenizer.json");
    nlohmann::json base = nlohmann::json::parse(text);
    std::vector<nlohmann::json> variants = {base};
    nlohmann::json v = base;
    v["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers",
         {{{"type", "NFKC"}},
          {{"type", "Lowercase"}},
          {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}}}};
    variants.push_back(v);
    v = base;
    v["added_tokens"].push_back({{"id", 99999},
                                 {"content", "ab"},
                                 {"single_word", true},
                                 {"lstrip", true},
                                 {"rstrip", true},
                                 {"normalized", true},
                                 {"special", false}});
    if (v["model"]["type"] == "Unigram") v["model"]["byte_fallback"] = true;
    variants.push_back(v);
    for (const auto& j : variants) {
      auto t = bertrt::Tokenizer::FromTokenizerJson(j.dump());
      if (!t.ok()) __builtin_trap();  // the committed files must load
      out.push_back(*t);
    }
  }
  return out;
}

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tokenizers = MakeTokenizers();
  if (size < 3) return 0;
  const uint8_t control = data[0];
  const size_t max_length = data[1] % 24;
  const auto strategy = static_cast<bertrt::Truncation>(control % 3);
  const bertrt::Tokenizer& tok = *tokenizers[(control >> 2) % tokenizers.size()];
  std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  std::optional<std::string_view> pair;
  if (control & 0x80) {
    const size_t cut = data[2] % rest.size();
    pair = rest.substr(cut);
    rest = rest.substr(0, cut);
  }
  CheckBoundedEncoding(tok, rest, pair, max_length, strategy, !(data[1] & 0x40), data[1] & 0x80,
                       1 + data[1] % 7);
  auto enc = tok.Encode(rest, pair, max_length, strategy);
  if (!enc.ok()) return 0;
  const size_t n = enc->input_ids.size();
  if (enc->token_type_ids.size() != n || enc->offsets.size() != n ||
      enc->special_tokens_mask.size() != n || enc->sequence_ids.size() != n) {
    __builtin_trap();
  }
  const size_t limit = std::max(CodePoints(rest), pair ? CodePoints(*pair) : 0);
  for (size_t i = 0; i < n; ++i) {
    const auto [start, end] = enc->offsets[i];
    if (start > end || end > limit) __builtin_trap();
    if (enc->input_ids[i] < 0 || static_cast<size_t>(enc->input_ids[i]) >= tok.vocab_size()) {
      __builtin_trap();
    }
  }
  (void)tok.Decode(enc->input_ids, control & 0x40);
  return 0;
}

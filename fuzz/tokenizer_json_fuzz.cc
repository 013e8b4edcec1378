// libFuzzer target for the component pipeline's loader: a tokenizer.json
// assembled from the input (which normalizers, pre-tokenizers and model, a
// regex, a precompiled charsmap, vocabulary pieces and merges all taken from
// the bytes, and a decoder chain), or the bytes as tokenizer.json themselves.
// Loading must fail with a Status or give a tokenizer that then encodes and
// decodes without crashing.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/tokenizer.h"

namespace {

using nlohmann::json;

std::string Base64(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  while (out.size() % 4) out += '=';
  return out;
}

// Splits `s` at '\n' into valid-UTF-8 pieces for vocabularies (json::dump
// would throw on invalid UTF-8, which is the JSON library's job, not ours).
std::vector<std::string> Pieces(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size() && out.size() < 64) {
    size_t end = s.find('\n', start);
    if (end == std::string_view::npos) end = s.size();
    std::string piece(s.substr(start, end - start));
    std::string clean;
    for (unsigned char c : piece) clean += c < 0x80 ? static_cast<char>(c) : '?';
    out.push_back(clean);
    start = end + 1;
  }
  return out;
}

json Model(uint8_t kind, const std::vector<std::string>& pieces) {
  if (kind % 3 == 0) {
    json vocab = json::array();
    vocab.push_back({"<unk>", 0.0});
    for (size_t i = 0; i < pieces.size(); ++i) {
      vocab.push_back({pieces[i], -1.0 - static_cast<double>(i % 7)});
    }
    return {{"type", "Unigram"},
            {"unk_id", kind & 8 ? json() : json(0)},
            {"vocab", vocab},
            {"byte_fallback", (kind & 16) != 0}};
  }
  if (kind % 3 == 1) {
    json vocab = json::object();
    json merges = json::array();
    vocab["<unk>"] = 0;
    for (const std::string& p : pieces) {
      if (!vocab.contains(p)) vocab[p] = static_cast<int>(vocab.size());
    }
    for (size_t i = 0; i + 1 < pieces.size(); i += 2) {
      const std::string merged = pieces[i] + pieces[i + 1];
      if (!vocab.contains(merged)) vocab[merged] = static_cast<int>(vocab.size());
      merges.push_back({pieces[i], pieces[i + 1]});
    }
    json m = {{"type", "BPE"},
              {"vocab", vocab},
              {"merges", merges},
              {"fuse_unk", (kind & 8) != 0},
              {"ignore_merges", (kind & 32) != 0}};
    if (kind & 16) m["unk_token"] = "<unk>";
    if (kind & 64) m["end_of_word_suffix"] = "</w>";
    return m;
  }
  json vocab = {{"[UNK]", 0}};
  for (const std::string& p : pieces) {
    if (!vocab.contains(p)) vocab[p] = static_cast<int>(vocab.size());
  }
  return {{"type", "WordPiece"}, {"vocab", vocab}, {"unk_token", "[UNK]"}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data + 4), size - 4);
  std::shared_ptr<bertrt::Tokenizer> tok;
  if (data[0] == 0xFF) {
    auto t = bertrt::Tokenizer::FromTokenizerJson(rest);
    if (!t.ok()) return 0;
    tok = *t;
  } else {
    const size_t cut = data[3] % (rest.size() + 1);
    const std::string_view payload = rest.substr(0, cut);
    const std::string_view text = rest.substr(cut);
    std::string pattern;
    for (unsigned char c : payload.substr(0, 24)) pattern += c < 0x80 ? static_cast<char>(c) : '.';
    json normalizers = json::array();
    const uint8_t n = data[1];
    if (n & 1)
      normalizers.push_back({{"type", "Precompiled"}, {"precompiled_charsmap", Base64(payload)}});
    if (n & 2) normalizers.push_back({{"type", "NFKD"}});
    if (n & 4)
      normalizers.push_back(
          {{"type", "Replace"}, {"pattern", {{"Regex", pattern}}}, {"content", "xy"}});
    if (n & 8) normalizers.push_back({{"type", "StripAccents"}});
    if (n & 16)
      normalizers.push_back(
          {{"type", "Strip"}, {"strip_left", true}, {"strip_right", (n & 32) != 0}});
    if (n & 64) normalizers.push_back({{"type", "Prepend"}, {"prepend", "_"}});
    json pre = json::array();
    const uint8_t p = data[2];
    static const char* kBehaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                       "MergedWithNext", "Contiguous"};
    if (p & 1)
      pre.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", pattern}}},
                     {"behavior", kBehaviors[(p >> 5) % 5]},
                     {"invert", (p & 16) != 0}});
    if (p & 2)
      pre.push_back({{"type", "Metaspace"},
                     {"replacement", "_"},
                     {"split", (p & 16) != 0},
                     {"prepend_scheme", p & 32 ? "first" : "always"}});
    if (p & 4)
      pre.push_back({{"type", "ByteLevel"},
                     {"add_prefix_space", (p & 32) != 0},
                     {"use_regex", (p & 64) != 0}});
    if (p & 8) pre.push_back({{"type", p & 128 ? "Whitespace" : "Digits"}});
    json root = {
        {"model", Model(data[0], Pieces(payload))},
        {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
        {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", pre}}},
        {"added_tokens",
         json::array(
             {{{"id", 0}, {"content", "ab"}, {"lstrip", true}, {"normalized", (n & 128) != 0}}})}};
    root["decoder"] = {
        {"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"Regex", pattern}}}, {"content", "<0x41>"}},
          {{"type", "ByteFallback"}},
          {{"type", "Strip"}, {"content", "_"}, {"start", n % 3}, {"stop", p % 3}},
          {{"type", p & 64 ? "Fuse" : "ByteLevel"}},
          {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "first"}},
          {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}}}};
    if (data[0] & 128) {
      root["post_processor"] = {{"type", "RobertaProcessing"},
                                {"sep", {"<unk>", 0}},
                                {"cls", {"<unk>", 0}},
                                {"trim_offsets", true}};
    }
    auto t = bertrt::Tokenizer::FromTokenizerJson(root.dump());
    if (!t.ok()) return 0;
    tok = *t;
    (void)tok->Encode(text, std::string_view("ab cd"), data[3] % 9);
  }
  auto enc = tok->Encode("hello ab world, ǅ 中文 e\xcc\x81 \xf0\x9f\x98\x80  x");
  if (enc.ok()) (void)tok->Decode(enc->input_ids, data[1] & 1);
  return 0;
}

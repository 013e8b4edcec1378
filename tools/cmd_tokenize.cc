// `bertrt tokenize MODEL`: JSON Lines in, token ids / type ids / offsets out,
// exactly as HF `tokenizers` gives them.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bertrt/plan.h"
#include "bertrt/tokenizer.h"
#include "cli_util.h"
#include "commands.h"

namespace bertrt::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  size_t max_length = 0;
  std::string truncation = "longest_first";
  // An offline tool gives every text's tokens unless told otherwise.
  size_t max_normalized_chars = 0;
};

template <typename T>
void AppendInts(std::string& out, const char* key, const std::vector<T>& v) {
  out += '"';
  out += key;
  out += "\": [";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  out += ']';
}

void AppendEncoding(std::string& out, const Encoding& e) {
  out += '{';
  AppendInts(out, "input_ids", e.input_ids);
  out += ", ";
  AppendInts(out, "token_type_ids", e.token_type_ids);
  out += ", \"offsets\": [";
  for (size_t i = 0; i < e.offsets.size(); ++i) {
    if (i) out += ", ";
    out += '[';
    out += std::to_string(e.offsets[i].first);
    out += ", ";
    out += std::to_string(e.offsets[i].second);
    out += ']';
  }
  out += "], ";
  AppendInts(out, "special_tokens_mask", e.special_tokens_mask);
  out += ", \"word_ids\": [";  // HF's: null for special tokens
  for (size_t i = 0; i < e.word_ids.size(); ++i) {
    if (i) out += ", ";
    out += e.word_ids[i] < 0 ? "null" : std::to_string(e.word_ids[i]);
  }
  out += "]}\n";
}

// Encodes one input line into `out`; returns false when it was an error.
bool TokenizeLine(const Tokenizer& tok, const std::string& line, size_t line_no,
                  const EncodeLimits& limits, std::string& out) {
  auto input = ParseTextLine(line, line_no);
  StatusOr<Encoding> enc = input.status();
  if (input.ok()) {
    std::optional<std::string_view> pair;
    if (input->text_pair) pair = *input->text_pair;
    enc = tok.Encode(input->text, pair, limits);
    if (!enc.ok())
      enc = InvalidArgument("line " + std::to_string(line_no) + ": " + enc.status().message());
  }
  if (!enc.ok()) {
    out += ErrorRecord(enc.status()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += '\n';
    return false;
  }
  AppendEncoding(out, *enc);
  return true;
}

int RunTokenize(const TokenizeOptions& opts) {
  auto tok = LoadTokenizerFrom(opts.model);
  if (!tok.ok()) return Fail(tok.status(), kExitModelError);
  const auto truncation = ParseTruncation(opts.truncation);
  if (!truncation.ok()) return Fail(truncation.status(), kExitUsage);
  EncodeLimits limits;
  limits.max_length = opts.max_length;
  limits.truncation = *truncation;
  limits.max_normalized_chars = opts.max_normalized_chars;
  std::ios::sync_with_stdio(false);
  std::string line;
  std::string out;
  size_t line_no = 0;
  bool failed = false;
  while (std::getline(std::cin, line)) {
    ++line_no;
    failed |= !TokenizeLine(**tok, line, line_no, limits, out);
    if (out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return failed ? kExitSomeInputsFailed : kExitOk;
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Tokenize JSON Lines from stdin with a model's tokenizer (WordPiece, Unigram or BPE).\n"
      "Each input line is {\"text\": ..., \"text_pair\": ...} (text_pair optional); each output\n"
      "line is {\"input_ids\": [...], \"token_type_ids\": [...], \"offsets\": [[start, end], "
      "...],\n\"special_tokens_mask\": [...], \"word_ids\": [...]}\n"
      "with offsets in Unicode code points of the text the token came from ([0, 0] for\n"
      "special tokens) and each token's word in its text (null for special tokens),\n"
      "identical to HF tokenizers. A bad line gives {\"error\": \"line N: ...\"}\n"
      "and the other lines are still processed (exit code 1).\n"
      "Example: echo '{\"text\": \"Hello world\"}' | bertrt tokenize models/all-MiniLM-L6-v2");
  cmd->add_option("MODEL", opts->model,
                  "model directory holding tokenizer.json, or vocab.txt (+ tokenizer_config.json), "
                  "or a plan file")
      ->required();
  cmd->add_option("--max-length", opts->max_length,
                  "truncate to at most N tokens including [CLS]/[SEP]; 0 or absent: no truncation");
  cmd->add_option("--truncation", opts->truncation,
                  "how to truncate a pair: longest_first (default), only_first, only_second")
      ->check(CLI::IsMember({"longest_first", "only_first", "only_second"}));
  AddMaxNormalizedChars(cmd, &opts->max_normalized_chars);
  cmd->callback([opts, &exit_code] { exit_code = RunTokenize(*opts); });
}

}  // namespace bertrt::cli

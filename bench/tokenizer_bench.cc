// Single-threaded tokenizer throughput: encodes the test corpus (every text
// and text_pair as a single text, repeated to a few MB) one text at a time.
// Usage: tokenizer_bench [MODEL_DIR] [CORPUS_JSONL] [TARGET_MB] [RUNS]
// Prints a human line and a final JSON line (read by bench/tokenizer_bench.py).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertrt/tokenizer.h"

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "models/all-MiniLM-L6-v2";
  const std::string corpus = argc > 2 ? argv[2] : "tests/data/tokenizer/corpus.jsonl";
  const double target_mb = argc > 3 ? std::atof(argv[3]) : 4.0;
  const int runs = argc > 4 ? std::atoi(argv[4]) : 5;

  auto tok = bertrt::Tokenizer::FromDirectory(model);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> base;
  std::ifstream in(corpus);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    for (const char* key : {"text", "text_pair"}) {
      if (j.contains(key) && j[key].is_string()) base.push_back(j[key].get<std::string>());
    }
  }
  if (base.empty()) {
    std::fprintf(stderr, "no texts in %s\n", corpus.c_str());
    return 1;
  }
  std::vector<std::string> texts;
  size_t bytes = 0;
  while (bytes < target_mb * 1e6) {
    for (const std::string& t : base) {
      texts.push_back(t);
      bytes += t.size();
    }
  }

  std::vector<double> seconds;
  size_t tokens = 0;
  for (int r = 0; r < runs + 1; ++r) {  // the first run warms up
    tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const std::string& t : texts) {
      auto enc = (*tok)->Encode(t);
      if (!enc.ok()) {
        std::fprintf(stderr, "%s\n", enc.status().ToString().c_str());
        return 1;
      }
      tokens += enc->input_ids.size();
    }
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    if (r > 0) seconds.push_back(d.count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  const double mb_s = bytes / median / 1e6;
  const double texts_s = texts.size() / median;
  std::printf("bertrt: %zu texts, %.2f MB, %zu tokens: median %.3f s over %d runs: %.2f MB/s, %.0f texts/s\n",
              texts.size(), bytes / 1e6, tokens, median, runs, mb_s, texts_s);
  std::printf("{\"texts\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"mb_s\": %.4f, \"texts_s\": %.1f}\n",
              texts.size(), bytes, tokens, median, mb_s, texts_s);
  return 0;
}

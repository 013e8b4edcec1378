// The embedding routes' request parse: ReadTextsBody (simdjson, what /embed
// and /v1/embeddings use for their usual bodies) against nlohmann's DOM parse
// with the texts copied out (what every other body takes, and what these
// took before), on /embed bodies of 1, 8 and 32 texts of about 250 chars
// (50 tokens), single-threaded, median of 7 runs each.
// Usage: request_parse_bench [RESULTS_MD]   (default bench/RESULTS.md; "-": print only)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/http/texts_body.h"

namespace {

template <typename F>
double MedianMicros(int iters, F&& f) {
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    runs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string results = argc > 1 ? argv[1] : "bench/RESULTS.md";
  std::string text =
      "The quick brown fox jumps over the lazy dog while the server batches requests and "
      "the engine computes embeddings for them, one after another, all day long. ";
  text += text;
  std::string table =
      "| texts | body bytes | nlohmann DOM + copy (us) | ReadTextsBody (us) | ratio |\n"
      "|---:|---:|---:|---:|---:|\n";
  size_t sink = 0;
  for (int n : {1, 8, 32}) {
    const nlohmann::json body = {
        {"inputs", std::vector<std::string>(n, text)}, {"truncate", true}, {"normalize", true}};
    const std::string bytes = body.dump();
    const int iters = 40000 / n;
    const double dom = MedianMicros(iters, [&] {
      const nlohmann::json b = nlohmann::json::parse(bytes, nullptr, false);
      std::vector<std::string> texts;
      for (const nlohmann::json& t : b["inputs"]) texts.push_back(t.get<std::string>());
      sink += texts.size();
    });
    const double fast = MedianMicros(iters, [&] {
      auto b = bertrt::server::ReadTextsBody(bytes, "inputs");
      sink += b ? b->texts.size() : 0;
    });
    char row[160];
    std::snprintf(row, sizeof(row), "| %d | %zu | %.1f | %.1f | %.1fx |\n", n, bytes.size(), dom,
                  fast, dom / fast);
    table += row;
  }
  std::printf("%s", table.c_str());
  if (sink == 0) return 1;  // keeps the work from being optimized away
  if (results == "-") return 0;
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::ofstream out(results, std::ios::app);
  out << "\n## Request parse: /embed bodies, " << date << ", " << host << "\n\n"
      << "`" << argv[0] << "` (one thread; medians of 7 runs; the anchor, nlohmann's DOM parse, "
      << "in the same run)\n\n"
      << table;
  return 0;
}

// bertrt bench MODEL: times the engine in-process on random valid token ids,
// from ids in host memory to outputs in host memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"

namespace bertrt::cli {
namespace {

struct BenchFlags {
  std::string model;
  EngineFlags engine;
  std::string lengths;
  int batch_size = 1;
  int seq_len = 128;
  int iterations = 20;
  int warmup = 3;
  uint32_t seed = 1234;
  bool json = false;
};

// A batch of `batch_size` sequences of random ids, drawn past the first 1000
// ids (where BERT vocabularies keep special and unused tokens) when the
// vocabulary is that large.
RaggedBatch RandomBatch(const ModelConfig& config, int batch_size, int min_len, int max_len,
                        std::mt19937& rng) {
  std::uniform_int_distribution<int> len_dist(min_len, max_len);
  const int low = config.vocab_size > 1000 ? 1000 : 1;
  std::uniform_int_distribution<int> id_dist(low, config.vocab_size - 1);
  RaggedBatch batch;
  for (int s = 0; s < batch_size; ++s) {
    int len = len_dist(rng);
    std::vector<int32_t> ids(len), types(len, 0);
    for (int& id : ids) id = id_dist(rng);
    batch.Add(ids, types);
  }
  return batch;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

StatusOr<std::pair<int, int>> ParseLengths(const BenchFlags& flags) {
  if (flags.lengths.empty()) return std::make_pair(flags.seq_len, flags.seq_len);
  int lo = 0, hi = 0;
  char extra = 0;
  if (std::sscanf(flags.lengths.c_str(), "%d:%d%c", &lo, &hi, &extra) != 2 || lo < 1 || hi < lo)
    return InvalidArgument("--lengths " + flags.lengths +
                           ": expected MIN:MAX with 1 <= MIN <= MAX");
  return std::make_pair(lo, hi);
}

int Bench(const BenchFlags& flags) {
  auto lengths = ParseLengths(flags);
  if (!lengths.ok()) return Fail(lengths.status(), kExitUsage);
  auto loaded = LoadForCli(flags.model);  // an HF directory or a plan
  if (!loaded.ok()) return Fail(loaded.status(), kExitModelError);
  const ModelConfig& config = loaded->model->config;
  if (lengths->second > config.max_position_embeddings)
    return Fail(
        InvalidArgument("sequence length " + std::to_string(lengths->second) +
                        " is more than the model's " +
                        std::to_string(config.max_position_embeddings) + " position embeddings"),
        kExitUsage);
  auto engine = CreateEngine(loaded->model, flags.engine);
  if (!engine.ok()) return Fail(engine.status(), kExitRuntimeError);

  std::mt19937 rng(flags.seed);
  RaggedBatch batch = RandomBatch(config, flags.batch_size, lengths->first, lengths->second, rng);
  RunOptions options;
  ProgressBar progress("bench", flags.warmup + flags.iterations);
  for (int i = 0; i < flags.warmup; ++i) {
    auto out = (*engine)->Run(batch, options);
    if (!out.ok()) return Fail(out.status(), kExitRuntimeError);
    progress.Advance();
  }
  std::vector<double> ms;
  for (int i = 0; i < flags.iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = (*engine)->Run(batch, options);
    auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) return Fail(out.status(), kExitRuntimeError);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    progress.Advance();
  }
  const double median = Percentile(ms, 0.5);
  const double seq_per_s = flags.batch_size / (median / 1000.0);
  const double tokens_per_s = batch.num_tokens() / (median / 1000.0);
  nlohmann::json result = {
      {"model", flags.model},
      {"device", (*engine)->device()},
      {"precision", ResolvePrecision(flags.engine.device, flags.engine.precision)},
      {"threads", flags.engine.threads},
      {"batch_size", flags.batch_size},
      {"iterations", flags.iterations},
      {"median_ms", median},
      {"p90_ms", Percentile(ms, 0.9)},
      {"p99_ms", Percentile(ms, 0.99)},
      {"seq_per_s", seq_per_s},
      {"tokens_per_s", tokens_per_s},
      {"total_tokens", batch.num_tokens()},
      {"peak_memory_bytes", (*engine)->PeakMemoryBytes()},
  };
  if (flags.lengths.empty())
    result["seq_len"] = flags.seq_len;
  else
    result["lengths"] = flags.lengths;
  if (flags.json) {
    std::printf("%s\n", result.dump().c_str());
    return kExitOk;
  }
  const std::string device = (*engine)->device();
  const int device_width = std::max<int>(6, static_cast<int>(device.size()));
  std::string len_text = flags.lengths.empty() ? std::to_string(flags.seq_len) : flags.lengths;
  std::printf("%-*s %-6s %-9s %5s %9s %9s %9s %10s %11s %9s %10s\n", device_width, "device", "prec",
              "lengths", "batch", "median_ms", "p90_ms", "p99_ms", "seq/s", "tokens/s", "peak_MiB",
              "iterations");
  const std::string precision = ResolvePrecision(flags.engine.device, flags.engine.precision);
  std::printf("%-*s %-6s %-9s %5d %9.3f %9.3f %9.3f %10.1f %11.0f %9.1f %10d\n", device_width,
              device.c_str(), precision.c_str(), len_text.c_str(), flags.batch_size, median,
              Percentile(ms, 0.9), Percentile(ms, 0.99), seq_per_s, tokens_per_s,
              (*engine)->PeakMemoryBytes() / 1048576.0, flags.iterations);
  return kExitOk;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time the engine in-process on random valid token ids (ids in host memory to outputs in "
      "host memory); prints a table, or one JSON object with --json.");
  cmd->add_option("MODEL", flags->model, "HF model directory or plan file")->required();
  AddEngineOptions(cmd, &flags->engine);
  cmd->add_option("--batch-size", flags->batch_size, "Sequences per batch")
      ->check(CLI::PositiveNumber);
  auto* seq = cmd->add_option("--seq-len", flags->seq_len, "Tokens per sequence")
                  ->check(CLI::PositiveNumber);
  cmd->add_option("--lengths", flags->lengths,
                  "MIN:MAX: a ragged batch, lengths uniform in [MIN, MAX]")
      ->excludes(seq);
  cmd->add_option("--iterations", flags->iterations, "Timed runs")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", flags->warmup, "Untimed runs first")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", flags->seed, "Random seed for the token ids and lengths");
  cmd->add_flag("--json", flags->json, "Print one JSON object instead of a table");
  cmd->callback([flags, &exit_code]() { exit_code = Bench(*flags); });
}

}  // namespace bertrt::cli

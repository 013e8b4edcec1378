// `bertrt bench`'s flags, shared by its two modes: the engine timed alone
// (cmd_bench.cc) and the load generator against a server or the serving
// stack in-process (bench_load.cc).
#pragma once

#include <string>
#include <vector>

#include "cli_util.h"

namespace bertrt::cli {

struct BenchFlags {
  std::string model;
  ImportFlags import;
  EngineFlags engine;
  std::string lengths;  // engine mode: tokens; load mode: words per text
  uint32_t seed = 1234;
  bool json_given = false;
  std::string json_path;  // empty with json_given: JSON on stdout instead of the table

  // Engine mode.
  int batch_size = 1;
  int seq_len = 128;
  int iterations = 20;
  int warmup = 3;
  bool profile = false;

  // Load mode: a target ...
  std::string url;
  bool serve_inprocess = false;
  std::string model_name;
  std::string endpoint = "kserve";
  std::string metrics_url;  // grpc://: the server's HTTP address, for /metrics
  double timeout_s = 60;
  // ... a load ...
  std::string concurrency;
  std::string request_rate;
  std::string request_distribution = "poisson";
  int max_inflight = 64;
  double duration_s = 5;
  double warmup_s = 1;
  int64_t requests = 0;
  int sequences_per_request = 1;
  // ... texts ...
  std::string texts_file;
  int num_texts = 1000;
  // ... reports ...
  std::string svg_path;
  std::string baseline;
  std::string replot;  // a run's JSON, reported again instead of measuring
  // ... and, in-process, what `bertrt serve` would run (its flags and defaults).
  ServingFlags serving;
};

// The load generator; returns the exit code.
int RunLoadBench(const BenchFlags& flags);

}  // namespace bertrt::cli

// bertrt bench MODEL: times the engine in-process on random valid token ids,
// from ids in host memory to outputs in host memory. With --url or
// --serve-inprocess it is a load generator instead (bench_load.cc).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench.h"
#include "commands.h"
#include "loadgen/load_stats.h"

namespace bertrt::cli {
namespace {

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

// --profile: the same batch on a CUDA engine (the same placement and
// precision, 8 bits included) that stamps the GPU's timer between operations
// inside its CUDA graph (InstanceSpec::profile), per forward pass; with the
// unprofiled graph-run median, what lies outside the GEMMs and attention.
StatusOr<nlohmann::json> ProfileOps(std::shared_ptr<const Model> model, const Tokenizer& tokenizer,
                                    const BenchFlags& flags, const RaggedBatch& batch,
                                    double graph_median_ms) {
  serving::InstanceSpec spec = Instance(flags.engine);
  spec.profile = true;
  ASSIGN_OR_RETURN(auto engine,
                   serving::CreateEngine(std::move(model), tokenizer, spec, PrintNotice));
  // The first run is eager and has the graph captured; the runs counted
  // replay it.
  constexpr int kWarmup = 3, kRuns = 20;
  for (int i = 0; i < kWarmup; ++i) {
    RETURN_IF_ERROR(engine->Run(batch, {}).status());
    engine->WaitForBackgroundWork();
  }
  const std::vector<OpProfile> before = engine->Profile();
  for (int i = 0; i < kRuns; ++i) RETURN_IF_ERROR(engine->Run(batch, {}).status());
  nlohmann::json ops = nlohmann::json::array();
  double gemm_ms = 0, attention_ms = 0, total_ms = 0;
  for (const OpProfile& op : engine->Profile()) {
    OpProfile d = op;
    for (const OpProfile& b : before)
      if (b.name == op.name) {
        d.calls -= b.calls;
        d.seconds -= b.seconds;
        d.flops -= b.flops;
      }
    const double ms = d.seconds * 1e3 / kRuns;
    total_ms += ms;
    if (d.name.rfind("gemm", 0) == 0) gemm_ms += ms;
    if (d.name == "attention") attention_ms += ms;
    ops.push_back({{"op", d.name},
                   {"calls_per_forward", d.calls / kRuns},
                   {"ms_per_forward", ms},
                   {"tflops", d.seconds > 0 && d.flops > 0 ? d.flops / d.seconds / 1e12 : 0.0}});
  }
  return nlohmann::json{
      {"ops", ops},
      {"runs", kRuns},
      {"in_graph", engine->KeptShapes() > 0},
      {"sum_of_ops_ms", total_ms},
      {"gemm_ms", gemm_ms},
      {"attention_ms", attention_ms},
      {"graph_median_ms", graph_median_ms},
      {"outside_gemm_and_attention_ms", graph_median_ms - gemm_ms - attention_ms}};
}

void PrintProfile(const nlohmann::json& p) {
  std::printf("\nper operation (%s, GPU timer stamps between operations, mean of %d forwards):\n",
              p["in_graph"].get<bool>() ? "in the CUDA graph" : "eager", p["runs"].get<int>());
  std::printf("%-22s %6s %10s %7s %8s\n", "op", "calls", "ms", "share", "TFLOP/s");
  const double total = p["sum_of_ops_ms"].get<double>();
  for (const auto& op : p["ops"]) {
    const double ms = op["ms_per_forward"].get<double>();
    std::printf("%-22s %6ld %10.3f %6.1f%% %8.1f\n", op["op"].get<std::string>().c_str(),
                op["calls_per_forward"].get<long>(), ms, total > 0 ? 100 * ms / total : 0.0,
                op["tflops"].get<double>());
  }
  std::printf(
      "GEMMs %.3f ms + attention %.3f ms of a %.3f ms forward (graph median): %.3f ms "
      "outside them\n",
      p["gemm_ms"].get<double>(), p["attention_ms"].get<double>(),
      p["graph_median_ms"].get<double>(), p["outside_gemm_and_attention_ms"].get<double>());
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
  if (flags.profile && flags.engine.device != "cuda")
    return Fail(InvalidArgument("--profile times the CUDA engine's operations; add --device cuda"),
                kExitUsage);
  auto lengths = ParseLengths(flags);
  if (!lengths.ok()) return Fail(lengths.status(), kExitUsage);
  const auto warmup = WarmUpGpus(flags.engine, {0});
  auto loaded = LoadForCli(flags.model, flags.import);
  if (!loaded.ok()) return Fail(loaded.status(), kExitModelError);
  const ModelConfig& config = loaded->model->config;
  if (lengths->second > config.max_positions())
    return Fail(
        InvalidArgument("sequence length " + std::to_string(lengths->second) +
                        " is more than the model's " +
                        std::to_string(config.max_positions()) + " position embeddings"),
        kExitUsage);
  // --profile (CUDA alone) makes a second engine of the model: an fp8 one is
  // quantized once, here, for both (as the server shares one quantization).
  std::shared_ptr<const Model> model = loaded->model;
  if (flags.profile &&
      serving::QuantizedFormat(*model, Instance(flags.engine)) == QuantFormat::kFp8) {
    auto quantized =
        serving::QuantizeModel(model, *loaded->tokenizer, Instance(flags.engine), PrintNotice);
    if (!quantized.ok())
      return Fail(quantized.status(), EngineFailureCode(quantized.status().code()));
    model = std::move(quantized).value();
  }
  auto engine = CreateEngine(model, *loaded->tokenizer, flags.engine);
  if (!engine.ok()) return Fail(engine.status(), EngineFailureCode(engine.status().code()));

  std::mt19937 rng(flags.seed);
  RaggedBatch batch = RandomBatch(config, flags.batch_size, lengths->first, lengths->second, rng);
  RunOptions options;
  ProgressBar progress("bench", flags.warmup + flags.iterations);
  for (int i = 0; i < flags.warmup; ++i) {
    auto out = (*engine)->Run(batch, options);
    if (!out.ok()) return Fail(out.status(), kExitRuntimeError);
    progress.Advance();
  }
  // The timed runs see the steady state: the batch's CUDA graph captured.
  (*engine)->WaitForBackgroundWork();
  std::vector<double> ms;
  for (int i = 0; i < flags.iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = (*engine)->Run(batch, options);
    auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) return Fail(out.status(), kExitRuntimeError);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    progress.Advance();
  }
  // The load generator's nearest-rank percentiles, so both modes report alike.
  const double median = loadgen::Percentile(ms, 0.5);
  const double p90 = loadgen::Percentile(ms, 0.9), p99 = loadgen::Percentile(ms, 0.99);
  nlohmann::json profile;
  if (flags.profile) {
    auto profiled = ProfileOps(model, *loaded->tokenizer, flags, batch, median);
    if (!profiled.ok()) return Fail(profiled.status(), kExitRuntimeError);
    profile = std::move(*profiled);
  }
  const double seq_per_s = flags.batch_size / (median / 1000.0);
  const double tokens_per_s = batch.num_tokens() / (median / 1000.0);
  const std::string precision = serving::EffectivePrecision(*loaded->model, Instance(flags.engine));
  nlohmann::json result = {
      {"model", flags.model},
      {"device", (*engine)->device()},
      {"precision", precision},
      {"threads", flags.engine.threads},
      {"batch_size", flags.batch_size},
      {"iterations", flags.iterations},
      {"median_ms", median},
      {"p90_ms", p90},
      {"p99_ms", p99},
      {"seq_per_s", seq_per_s},
      {"tokens_per_s", tokens_per_s},
      {"total_tokens", batch.num_tokens()},
      {"peak_memory_bytes", (*engine)->PeakMemoryBytes()},
  };
  if (!profile.is_null()) result["profile"] = profile;
  if (flags.lengths.empty()) {
    result["seq_len"] = flags.seq_len;
  } else {
    result["lengths"] = flags.lengths;
    // The lengths drawn, so that another system can run this very batch.
    std::vector<int> drawn;
    for (int i = 0; i < batch.num_seqs(); ++i)
      drawn.push_back(batch.cu_seqlens[i + 1] - batch.cu_seqlens[i]);
    result["sequence_lengths"] = drawn;
  }
  if (!flags.json_path.empty()) {
    std::FILE* out = std::fopen(flags.json_path.c_str(), "w");
    if (!out || std::fprintf(out, "%s\n", result.dump().c_str()) < 0 || std::fclose(out) != 0)
      return Fail(Unavailable("--json " + flags.json_path + ": cannot write"), kExitUnavailable);
  } else if (flags.json_given) {
    std::printf("%s\n", result.dump().c_str());
    return kExitOk;
  }
  const std::string device = (*engine)->device();
  const int device_width = std::max<int>(6, static_cast<int>(device.size()));
  std::string len_text = flags.lengths.empty() ? std::to_string(flags.seq_len) : flags.lengths;
  std::printf("%-*s %-6s %-9s %5s %9s %9s %9s %10s %11s %9s %10s\n", device_width, "device", "prec",
              "lengths", "batch", "median_ms", "p90_ms", "p99_ms", "seq/s", "tokens/s", "peak_MiB",
              "iterations");
  std::printf("%-*s %-6s %-9s %5d %9.3f %9.3f %9.3f %10.1f %11.0f %9.1f %10d\n", device_width,
              device.c_str(), precision.c_str(), len_text.c_str(), flags.batch_size, median, p90,
              p99, seq_per_s, tokens_per_s, (*engine)->PeakMemoryBytes() / 1048576.0,
              flags.iterations);
  if (!profile.is_null()) PrintProfile(profile);
  return kExitOk;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time the engine in-process on random valid token ids (ids in host memory to outputs in "
      "host memory); or, with --url or --serve-inprocess, generate load of text requests against "
      "a server or the serving stack in-process (throughput, latency percentiles, the server's "
      "queue/compute split). Prints a table, or JSON with --json. Load runs exit 4 when the "
      "server cannot be reached or a step got no successful answer.");
  auto* model = cmd->add_option("MODEL", flags->model, kModelHelp);
  AddImportOptions(cmd, &flags->import);
  AddEngineOptions(cmd, &flags->engine);
  CLI::Option* profile_flag = cmd->add_flag(
      "--profile", flags->profile,
      "Engine mode, --device cuda: also time each operation (GEMMs with their TFLOP/s, attention, "
      "LayerNorm, ...) and report the time outside GEMMs and attention");
  cmd->add_option("--lengths", flags->lengths,
                  "MIN:MAX, uniform: engine mode, tokens per sequence of a ragged batch; load "
                  "mode, words per generated text (default 16:64)");
  cmd->add_option("--seed", flags->seed, "Random seed (token ids, lengths, texts, arrivals)");
  cmd->add_option("--json", flags->json_path,
                  "--json: print JSON instead of the table; --json FILE: write JSON to FILE too")
      ->expected(0, 1);

  // Engine mode.
  std::vector<CLI::Option*> engine_only{profile_flag};
  engine_only.push_back(cmd->add_option("--batch-size", flags->batch_size, "Sequences per batch")
                            ->check(CLI::PositiveNumber));
  auto* seq = cmd->add_option("--seq-len", flags->seq_len, "Tokens per sequence")
                  ->check(CLI::PositiveNumber);
  engine_only.push_back(seq);
  cmd->get_option("--lengths")->excludes(seq);
  engine_only.push_back(
      cmd->add_option("--iterations", flags->iterations, "Timed runs")->check(CLI::PositiveNumber));
  engine_only.push_back(cmd->add_option("--warmup", flags->warmup, "Untimed runs first")
                            ->check(CLI::NonNegativeNumber));

  // Load mode. Its values are checked in RunLoadBench, not by CLI11
  // validators, so a bad one exits with kExitUsage like every other usage
  // error of this mode.
  // The target.
  auto* url = cmd->add_option("--url", flags->url,
                              "Load a server: http://HOST:PORT (KServe v2 or TEI over HTTP) or "
                              "grpc://HOST:PORT (KServe v2 ModelInfer)")
                  ->excludes(model);
  auto* inprocess = cmd->add_flag(
      "--serve-inprocess", flags->serve_inprocess,
      "Load MODEL through the serving stack in-process (tokenizer + dynamic batcher + engines, "
      "as `bertrt serve` runs them) without the network, for comparing with --url");
  inprocess->excludes(url);
  std::vector<CLI::Option*> load_only;
  load_only.push_back(cmd->add_option("--model", flags->model_name,
                                      "--url: model name to infer on (default: the server's "
                                      "default, from /info); --serve-inprocess: name to serve as"));
  load_only.push_back(cmd->add_option(
      "--endpoint", flags->endpoint,
      "kserve (POST /v2/models/NAME/infer, BYTES text input) or embed (TEI /embed)"));
  load_only.push_back(cmd->add_option(
      "--metrics-url", flags->metrics_url,
      "With grpc://: the server's HTTP address (http://HOST:PORT) to read /metrics from, for "
      "the queue/compute split"));
  load_only.push_back(cmd->add_option("--timeout-s", flags->timeout_s,
                                      "Per-request timeout; a request past it counts as an error"));
  // The load.
  load_only.push_back(cmd->add_option("--concurrency", flags->concurrency,
                                      "Closed-loop steps: N workers, one request outstanding each, "
                                      "e.g. 1,2,4,8 (default 1,2,4,8,16,32,64 without "
                                      "--request-rate)"));
  load_only.push_back(cmd->add_option("--request-rate", flags->request_rate,
                                      "Open-loop steps: arrivals at R requests/s, e.g. 50,100; "
                                      "latency counts from the scheduled arrival"));
  load_only.push_back(
      cmd->add_option("--request-distribution", flags->request_distribution,
                      "Open loop: arrival gaps exponential (poisson, the default) or all 1/R "
                      "(constant, perf_analyzer's default)")
          ->check(CLI::IsMember({"poisson", "constant"})));
  load_only.push_back(cmd->add_option("--max-inflight", flags->max_inflight,
                                      "Open loop: most requests outstanding at once (a later "
                                      "arrival waits and counts as a late send)"));
  load_only.push_back(
      cmd->add_option("--duration-s", flags->duration_s, "Measured seconds per step"));
  load_only.push_back(cmd->add_option("--warmup-s", flags->warmup_s,
                                      "Unmeasured seconds of the same load before each step"));
  load_only.push_back(cmd->add_option(
      "--requests", flags->requests, "Measure this many answers per step instead of --duration-s"));
  load_only.push_back(cmd->add_option("--sequences-per-request", flags->sequences_per_request,
                                      "Texts per request"));
  // The texts.
  load_only.push_back(cmd->add_option("--texts", flags->texts_file,
                                      "File of texts, one per line, sent in order and cycled "
                                      "(default: generated, see --lengths)"));
  load_only.push_back(
      cmd->add_option("--num-texts", flags->num_texts, "Generated texts (cycled through)"));
  // The reports.
  load_only.push_back(cmd->add_option("--svg", flags->svg_path,
                                      "Write a chart of p99 latency against throughput per step"));
  load_only.push_back(cmd->add_option("--baseline", flags->baseline,
                                      "JSON of an earlier load run (e.g. --serve-inprocess): adds "
                                      "the throughput ratio per step and its curve to the chart"));
  load_only.push_back(cmd->add_option("--replot", flags->replot,
                                      "Measure nothing: report the JSON of an earlier load run "
                                      "again (table, --json, --svg, --baseline), e.g. to chart "
                                      "runs made apart"));
  // The in-process serving stack, as `bertrt serve` takes it.
  const std::vector<CLI::Option*> inprocess_only = AddServingOptions(cmd, &flags->serving);

  cmd->callback([=, &exit_code]() {
    flags->json_given = cmd->get_option("--json")->count() > 0;
    auto given = [](const std::vector<CLI::Option*>& opts) -> std::string {
      for (CLI::Option* o : opts)
        if (o->count() > 0) return o->get_name();
      return "";
    };
    const bool load_mode = !flags->url.empty() || flags->serve_inprocess || !flags->replot.empty();
    if (!load_mode) {
      if (flags->model.empty())
        exit_code = Fail(InvalidArgument("give MODEL (engine timing) or --url URL (load a server)"),
                         kExitUsage);
      else if (std::string o = given(load_only) + given(inprocess_only); !o.empty())
        exit_code = Fail(InvalidArgument(o + " is for load runs: add --url URL or "
                                             "--serve-inprocess"),
                         kExitUsage);
      else
        exit_code = Bench(*flags);
      return;
    }
    if (std::string o = given(engine_only); !o.empty()) {
      exit_code = Fail(InvalidArgument(o + " times the engine alone; it does not apply to load "
                                           "runs (--url, --serve-inprocess)"),
                       kExitUsage);
    } else if (!flags->replot.empty() &&
               (flags->serve_inprocess || !flags->url.empty() || !flags->model.empty())) {
      exit_code = Fail(InvalidArgument("--replot measures nothing: give it without MODEL, --url "
                                       "and --serve-inprocess"),
                       kExitUsage);
    } else if (flags->serve_inprocess && flags->model.empty()) {
      exit_code = Fail(InvalidArgument("--serve-inprocess needs MODEL"), kExitUsage);
    } else if (std::string o = given(inprocess_only); !o.empty() && !flags->url.empty()) {
      exit_code =
          Fail(InvalidArgument(o + " is the server's: pass it to `bertrt serve`"), kExitUsage);
    } else if (!flags->url.empty() &&
               (cmd->get_option("--threads")->count() || cmd->get_option("--device")->count() ||
                cmd->get_option("--precision")->count())) {
      exit_code = Fail(InvalidArgument("--device/--precision/--threads are the server's with "
                                       "--url: pass them to `bertrt serve`"),
                       kExitUsage);
    } else {
      exit_code = RunLoadBench(*flags);
    }
  });
}

}  // namespace bertrt::cli

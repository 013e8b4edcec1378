// bertrt bench --url URL | MODEL --serve-inprocess: the load generator.
// Steps of a concurrency sweep (closed loop) and/or request rates (open
// loop, Poisson), each a warm-up and a measured window; per step the
// throughput, latency percentiles, errors by status and the server's own
// queue/compute split. A table on stdout, JSON and an SVG chart on request.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "bench.h"
#include "bench_targets.h"
#include "commands.h"

namespace bertrt::cli {
namespace {

using nlohmann::json;

StatusOr<std::vector<std::string>> ReadTexts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("--texts " + path + ": cannot open");
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) texts.push_back(line);
  }
  if (texts.empty()) return InvalidArgument("--texts " + path + ": no non-empty lines");
  return texts;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status WriteFile(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return Unavailable(std::string(flag) + " " + path + ": cannot write");
  return Status::Ok();
}

// Progress on stderr: redrawn in place on a terminal, else one line per step.
class StepProgress {
 public:
  StepProgress(size_t total) : total_(total), tty_(isatty(STDERR_FILENO)) {}
  void Update(size_t n, const loadgen::StepOptions& o, const std::string& label, double elapsed,
              int64_t answered) {
    if (!tty_) return;
    const double len = o.requests > 0 ? 0 : o.duration_s;
    if (elapsed < 0)
      std::fprintf(stderr, "\r[bench] step %zu/%zu %s: warming up %.1f s   ", n, total_,
                   label.c_str(), -elapsed);
    else if (len > 0)
      std::fprintf(stderr, "\r[bench] step %zu/%zu %s: %.1f/%.1f s, %lld answers   ", n, total_,
                   label.c_str(), elapsed, len, static_cast<long long>(answered));
    else
      std::fprintf(stderr, "\r[bench] step %zu/%zu %s: %lld/%lld answers   ", n, total_,
                   label.c_str(), static_cast<long long>(answered),
                   static_cast<long long>(o.requests));
    std::fflush(stderr);
  }
  void Done(size_t n, const loadgen::StepResult& s) {
    std::fprintf(stderr, "%s[bench] step %zu/%zu %s: %.1f req/s, p99 %.2f ms, %lld errors%s\n",
                 tty_ ? "\r\033[K" : "", n, total_, s.label().c_str(), s.requests_per_s, s.p99_ms,
                 static_cast<long long>(s.error_count()),
                 s.late_sends ? (", " + std::to_string(s.late_sends) + " late sends").c_str() : "");
    for (const auto& [kind, message] : s.error_messages)
      std::fprintf(stderr, "[bench]   %s: %s\n", kind.c_str(), message.c_str());
  }

 private:
  size_t total_;
  bool tty_;
};

// Throughput ratios to an earlier run's steps of the same label.
std::map<std::string, double> BaselineRatios(const std::vector<loadgen::StepResult>& steps,
                                             const std::vector<loadgen::StepResult>& base) {
  std::map<std::string, double> ratios;
  for (const auto& s : steps)
    for (const auto& b : base)
      if (s.label() == b.label() && b.sequences_per_s > 0)
        ratios[s.label()] = s.sequences_per_s / b.sequences_per_s;
  return ratios;
}

// A run as `--json` wrote it: for --baseline and --replot.
struct Run {
  std::string name;
  json report;
  std::vector<loadgen::StepResult> steps;
};

StatusOr<Run> ReadRun(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) return NotFound(flag + " " + path + ": cannot open");
  Run run;
  run.report = json::parse(in, nullptr, /*allow_exceptions=*/false);
  const json& j = run.report;
  if (j.is_discarded() || !j.is_object() || !j.contains("steps") || !j["steps"].is_array() ||
      j["steps"].empty())
    return InvalidArgument(flag + " " + path +
                           ": not the JSON of a `bertrt bench --json` load run");
  run.name =
      j.contains("target") && j["target"].is_string() ? j["target"].get<std::string>() : path;
  for (const json& step : j["steps"]) {
    auto s = loadgen::StepFromJson(step);
    if (!s.ok()) return InvalidArgument(flag + " " + path + ": " + s.status().message());
    run.steps.push_back(*s);
  }
  return run;
}

// Prints the table (or the JSON), writes --json and --svg: for a run just
// measured and for one read back with --replot alike.
int Emit(const BenchFlags& f, json report, const std::vector<loadgen::StepResult>& results,
         const std::string& name, const std::optional<Run>& baseline) {
  std::map<std::string, double> ratios;
  if (baseline) ratios = BaselineRatios(results, baseline->steps);
  report["steps"] = json::array();
  for (const auto& s : results) report["steps"].push_back(loadgen::StepToJson(s));
  size_t best = 0;
  for (size_t i = 1; i < results.size(); ++i)
    if (results[i].sequences_per_s > results[best].sequences_per_s) best = i;
  report["saturation"] = {{"label", results[best].label()},
                          {"sequences_per_s", results[best].sequences_per_s},
                          {"requests_per_s", results[best].requests_per_s}};
  report.erase("baseline");
  if (baseline)
    report["baseline"] = {
        {"file", f.baseline}, {"target", baseline->name}, {"throughput_ratio", ratios}};

  if (!f.json_given || !f.json_path.empty()) {
    std::printf("%s%s\n", loadgen::TableHeader().c_str(), baseline ? " vs_base" : "");
    for (const auto& s : results) {
      std::string ratio;
      if (baseline) {
        auto it = ratios.find(s.label());
        char buf[32];
        if (it != ratios.end()) std::snprintf(buf, sizeof(buf), " %6.3fx", it->second);
        ratio = it == ratios.end() ? "       -" : buf;
      }
      std::printf("%s%s\n", loadgen::TableRow(s).c_str(), ratio.c_str());
    }
  } else {
    std::printf("%s\n", report.dump(2).c_str());
  }
  if (!f.json_path.empty()) {
    if (Status st = WriteFile(f.json_path, report.dump(2) + "\n", "--json"); !st.ok())
      return Fail(st, kExitRuntimeError);
  }
  if (!f.svg_path.empty()) {
    std::vector<loadgen::Series> series;
    if (baseline) series.push_back({baseline->name, baseline->steps});
    series.push_back({name, results});
    // The chart is of the concurrency sweep; rate steps go on it only when
    // there is no sweep.
    std::vector<loadgen::Series> closed;
    for (auto& s : series) {
      loadgen::Series c{s.name, {}};
      for (const auto& st : s.steps)
        if (st.concurrency > 0) c.steps.push_back(st);
      if (!c.steps.empty()) closed.push_back(std::move(c));
    }
    const int per_request = report.contains("load") && report["load"].is_object()
                                ? report["load"].value("sequences_per_request", 1)
                                : 1;
    const std::string title = "bertrt bench: p99 latency vs throughput (" +
                              std::to_string(per_request) + " text/request)";
    if (Status st = WriteFile(f.svg_path,
                              loadgen::RenderSvg(title, closed.empty() ? series : closed), "--svg");
        !st.ok())
      return Fail(st, kExitRuntimeError);
  }
  return kExitOk;
}

// The load-mode values CLI11 only parsed.
Status CheckFlags(const BenchFlags& f) {
  auto positive = [](double v, const char* flag) {
    return v > 0 ? Status::Ok() : InvalidArgument(std::string(flag) + " must be positive");
  };
  if (f.endpoint != "kserve" && f.endpoint != "embed")
    return InvalidArgument("--endpoint " + f.endpoint + ": expected kserve or embed");
  RETURN_IF_ERROR(positive(f.timeout_s, "--timeout-s"));
  RETURN_IF_ERROR(positive(f.max_inflight, "--max-inflight"));
  RETURN_IF_ERROR(positive(f.duration_s, "--duration-s"));
  if (f.warmup_s < 0) return InvalidArgument("--warmup-s must not be negative");
  if (f.requests < 0) return InvalidArgument("--requests must be positive");
  if (f.sequences_per_request < 1 || f.sequences_per_request > 4096)
    return InvalidArgument("--sequences-per-request must be in 1..4096");
  RETURN_IF_ERROR(positive(f.num_texts, "--num-texts"));
  return Status::Ok();
}

}  // namespace

int RunLoadBench(const BenchFlags& f) {
  // Flags first, so a usage error never waits for a model or a server.
  if (Status st = CheckFlags(f); !st.ok()) return Fail(st, kExitUsage);
  std::vector<loadgen::StepOptions> steps;
  loadgen::StepOptions base;
  base.max_inflight = f.max_inflight;
  base.warmup_s = f.warmup_s;
  base.duration_s = f.duration_s;
  base.requests = f.requests;
  base.sequences_per_request = f.sequences_per_request;
  base.seed = f.seed;
  auto distribution = loadgen::ParseRequestDistribution(f.request_distribution);
  if (!distribution.ok()) return Fail(distribution.status(), kExitUsage);
  base.distribution = *distribution;
  if (!f.concurrency.empty() || f.request_rate.empty()) {
    auto list = loadgen::ParseIntList(f.concurrency.empty() ? "1,2,4,8,16,32,64" : f.concurrency,
                                      "--concurrency");
    if (!list.ok()) return Fail(list.status(), kExitUsage);
    for (int c : *list) {
      steps.push_back(base);
      steps.back().concurrency = c;
    }
  }
  if (!f.request_rate.empty()) {
    auto list = loadgen::ParseNumberList(f.request_rate, "--request-rate");
    if (!list.ok()) return Fail(list.status(), kExitUsage);
    for (double r : *list) {
      steps.push_back(base);
      steps.back().request_rate = r;
    }
  }
  std::pair<int, int> words{16, 64};
  if (!f.lengths.empty()) {
    if (!f.texts_file.empty())
      return Fail(InvalidArgument("--lengths generates texts; --texts reads them: give one"),
                  kExitUsage);
    auto range = loadgen::ParseRange(f.lengths, "--lengths");
    if (!range.ok()) return Fail(range.status(), kExitUsage);
    words = *range;
  }
  std::optional<Run> baseline;
  if (!f.baseline.empty()) {
    auto b = ReadRun(f.baseline, "--baseline");
    if (!b.ok()) return Fail(b.status(), kExitUsage);
    baseline = std::move(*b);
  }
  if (!f.replot.empty()) {
    auto run = ReadRun(f.replot, "--replot");
    if (!run.ok()) return Fail(run.status(), kExitUsage);
    return Emit(f, run->report, run->steps, run->name, baseline);
  }
  std::vector<std::string> texts;
  if (!f.texts_file.empty()) {
    auto read = ReadTexts(f.texts_file);
    if (!read.ok()) return Fail(read.status(), kExitUsage);
    texts = std::move(*read);
  } else {
    texts = loadgen::GenerateTexts(f.num_texts, words.first, words.second, f.seed);
  }
  const loadgen::TextPool pool(texts);

  json report;
  std::unique_ptr<loadgen::Target> target;
  if (f.serve_inprocess) {
    const serving::ServeDefaults defaults = MakeServeDefaults(f.engine, f.serving, nullptr);
    const std::string name = f.model_name.empty() ? serving::DefaultModelName(f.model) : f.model_name;
    auto loaded = LoadInProcessTarget(name, f.model, defaults, MakeImportOptions(f.import));
    if (!loaded.ok()) return Fail(loaded.status(), kExitModelError);
    target = std::move(*loaded);
    report["kind"] = "inprocess";
    report["model"] = name;
    report["source"] = f.model;
    report["device"] = f.engine.device;
    report["precision"] = ResolvePrecision(f.engine.device, f.engine.precision);
    report["threads"] = f.engine.threads;
    const ServingFlags& sv = f.serving;
    report["scheduler"] = {{"instances", sv.instances},
                           {"gpus", sv.gpus},
                           {"max_batch_tokens", sv.max_batch_tokens},
                           {"max_batch_size", sv.max_batch_size},
                           {"max_queue_delay_us", sv.max_queue_delay_us},
                           {"max_queue_size", sv.max_queue_size},
                           {"request_timeout_ms", sv.request_timeout_ms}};
  } else {
    auto url = loadgen::ParseUrl(f.url);
    if (!url.ok()) return Fail(url.status(), kExitUsage);
    ServerTargetOptions o;
    o.url = *url;
    o.endpoint = f.endpoint == "embed" ? HttpEndpoint::kEmbed : HttpEndpoint::kKServe;
    o.model = f.model_name;
    o.timeout_s = f.timeout_s;
    o.metrics_url = f.metrics_url;
    auto connected = ConnectServerTarget(o, texts.front());
    if (!connected.ok())
      return Fail(connected.status(),
                  connected.status().code() == StatusCode::kInvalidArgument ||
                          connected.status().code() == StatusCode::kUnimplemented
                      ? kExitUsage
                      : kExitRuntimeError);
    target = std::move(*connected);
    report["kind"] = url->scheme == "grpc" ? "grpc" : "http";
    report["url"] = f.url;
    report["endpoint"] = f.endpoint;
  }
  report["target"] = target->Describe();
  if (json details = target->Details(); !details.is_null()) report["server_info"] = details;
  report["load"] = {
      {"duration_s", f.duration_s},     {"warmup_s", f.warmup_s},
      {"requests", f.requests},         {"sequences_per_request", f.sequences_per_request},
      {"max_inflight", f.max_inflight}, {"seed", f.seed}};
  report["texts"] =
      f.texts_file.empty()
          ? json{{"source", "generated"},
                 {"words", std::to_string(words.first) + ":" + std::to_string(words.second)},
                 {"count", texts.size()}}
          : json{{"source", f.texts_file}, {"count", texts.size()}};
  std::fprintf(stderr, "[bench] %s: %zu steps of %s\n", target->Describe().c_str(), steps.size(),
               f.requests > 0 ? (std::to_string(f.requests) + " answers").c_str()
                              : (Num(f.duration_s) + " s").c_str());

  std::vector<loadgen::StepResult> results;
  StepProgress progress(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    loadgen::StepOptions o = steps[i];
    loadgen::StepResult label_only;
    label_only.concurrency = o.concurrency;
    label_only.request_rate = o.request_rate;
    const std::string label = label_only.label();
    o.on_progress = [&, n = i + 1](double elapsed, int64_t answered) {
      progress.Update(n, o, label, elapsed, answered);
    };
    auto step = loadgen::RunStep(*target, pool, o);
    if (!step.ok()) return Fail(step.status(), kExitRuntimeError);
    progress.Done(i + 1, *step);
    results.push_back(*step);
  }

  if (int code = Emit(f, std::move(report), results, target->Describe(), baseline); code)
    return code;
  // Errors are counted, not fatal; but a step with no answer at all means the
  // target went away or refuses everything, which a script must not miss.
  for (const auto& s : results)
    if (s.requests == 0)
      return Fail(Unavailable("step " + s.label() + ": no request succeeded (errors above)"),
                  kExitRuntimeError);
  return kExitOk;
}

}  // namespace bertrt::cli

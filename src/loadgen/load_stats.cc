#include "loadgen/load_stats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

namespace bertrt::loadgen {
namespace {

// Common English words, each one WordPiece token in BERT's uncased
// vocabulary, so N words is close to N tokens (+2 for [CLS]/[SEP]).
constexpr const char* kWords[] = {
    "the",      "of",        "and",    "to",     "in",     "is",     "you",    "that",
    "it",       "he",        "was",    "for",    "on",     "are",    "as",     "with",
    "his",      "they",      "at",     "be",     "this",   "have",   "from",   "or",
    "one",      "had",       "by",     "word",   "but",    "not",    "what",   "all",
    "were",     "we",        "when",   "your",   "can",    "said",   "there",  "use",
    "an",       "each",      "which",  "she",    "do",     "how",    "their",  "if",
    "will",     "up",        "other",  "about",  "out",    "many",   "then",   "them",
    "these",    "so",        "some",   "her",    "would",  "make",   "like",   "him",
    "into",     "time",      "has",    "look",   "two",    "more",   "write",  "go",
    "see",      "number",    "no",     "way",    "could",  "people", "my",     "than",
    "first",    "water",     "been",   "call",   "who",    "oil",    "its",    "now",
    "find",     "long",      "down",   "day",    "did",    "get",    "come",   "made",
    "may",      "part",      "over",   "new",    "sound",  "take",   "only",   "little",
    "work",     "know",      "place",  "year",   "live",   "me",     "back",   "give",
    "most",     "very",      "after",  "thing",  "our",    "just",   "name",   "good",
    "sentence", "man",       "think",  "say",    "great",  "where",  "help",   "through",
    "much",     "before",    "line",   "right",  "too",    "mean",   "old",    "any",
    "same",     "tell",      "boy",    "follow", "came",   "want",   "show",   "also",
    "around",   "form",      "three",  "small",  "set",    "put",    "end",    "does",
    "another",  "well",      "large",  "must",   "big",    "even",   "such",   "because",
    "turn",     "here",      "why",    "ask",    "went",   "men",    "read",   "need",
    "land",     "different", "home",   "us",     "move",   "try",    "kind",   "hand",
    "picture",  "again",     "change", "off",    "play",   "spell",  "air",    "away",
    "animal",   "house",     "point",  "page",   "letter", "mother", "answer", "found",
    "study",    "still",     "learn",  "should", "world",  "high",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// Uniform in [lo, hi] from raw mt19937 output; std::uniform_int_distribution
// is implementation-defined, which would make the texts differ by library.
int Uniform(std::mt19937& rng, int lo, int hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int>(static_cast<uint64_t>(rng()) % span);
}

std::string Num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// Parses `{a="x",b="y"}` starting at s[i] == '{'; returns the index after '}'
// or npos on malformed text. Values are unescaped (\\, \", \n).
size_t ParseLabels(const std::string& s, size_t i, std::map<std::string, std::string>& labels) {
  ++i;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    if (i < s.size() && s[i] == '}') return i + 1;
    const size_t eq = s.find('=', i);
    if (eq == std::string::npos || eq + 1 >= s.size() || s[eq + 1] != '"') return std::string::npos;
    std::string key = s.substr(i, eq - i);
    std::string value;
    i = eq + 2;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) {
        ++i;
        value.push_back(s[i] == 'n' ? '\n' : s[i]);
      } else {
        value.push_back(s[i]);
      }
      ++i;
    }
    if (i >= s.size()) return std::string::npos;
    labels[key] = value;
    ++i;  // the closing quote
  }
  return std::string::npos;
}

}  // namespace

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * values.size());
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

// Calls on_sample(labels, value) for each sample of `metric` (for `model`
// where one is named); returns whether there was one.
template <class OnSample>
StatusOr<bool> ForEachSample(const std::string& text, const std::string& metric,
                             const std::string& model, OnSample on_sample) {
  std::istringstream in(text);
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos || line.compare(0, name_end, metric) != 0 ||
        name_end != metric.size())
      continue;
    std::map<std::string, std::string> labels;
    size_t i = name_end;
    if (line[i] == '{') {
      i = ParseLabels(line, i, labels);
      if (i == std::string::npos) return InvalidArgument("malformed metrics line: " + line);
    }
    if (!model.empty()) {
      auto it = labels.find("model");
      if (it == labels.end() || it->second != model) continue;
    }
    char* end = nullptr;
    const double v = std::strtod(line.c_str() + i, &end);
    if (end == line.c_str() + i) return InvalidArgument("metrics line without a value: " + line);
    on_sample(labels, v);
    found = true;
  }
  return found;
}

StatusOr<double> SumMetric(const std::string& text, const std::string& metric,
                           const std::string& model) {
  double sum = 0;
  ASSIGN_OR_RETURN(const bool found, ForEachSample(text, metric, model,
                                                   [&](const auto&, double v) { sum += v; }));
  if (!found)
    return NotFound("no " + metric + (model.empty() ? "" : " for model " + model) +
                    " in the metrics");
  return sum;
}

StatusOr<ServerTotals> ParseServerTotals(const std::string& metrics_text,
                                         const std::string& model) {
  ServerTotals t;
  ASSIGN_OR_RETURN(t.queue_seconds,
                   SumMetric(metrics_text, "bertrt_queue_duration_seconds_sum", model));
  ASSIGN_OR_RETURN(t.compute_seconds,
                   SumMetric(metrics_text, "bertrt_compute_duration_seconds_sum", model));
  ASSIGN_OR_RETURN(t.requests,
                   SumMetric(metrics_text, "bertrt_compute_duration_seconds_count", model));
  for (const bool sums : {true, false}) {
    auto add = [&](const std::map<std::string, std::string>& labels, double v) {
      auto stage = labels.find("stage");
      if (stage == labels.end()) return;
      std::pair<double, double>& totals = t.stages[stage->second];
      (sums ? totals.first : totals.second) += v;
    };
    const std::string metric =
        std::string("bertrt_request_stage_seconds") + (sums ? "_sum" : "_count");
    RETURN_IF_ERROR(ForEachSample(metrics_text, metric, model, add).status());
  }
  return t;
}

std::vector<std::string> GenerateTexts(int count, int min_words, int max_words, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> texts;
  texts.reserve(count);
  for (int t = 0; t < count; ++t) {
    const int n = Uniform(rng, min_words, max_words);
    std::string text;
    for (int w = 0; w < n; ++w) {
      if (w) text.push_back(' ');
      text += kWords[Uniform(rng, 0, static_cast<int>(kNumWords) - 1)];
    }
    texts.push_back(std::move(text));
  }
  return texts;
}

StatusOr<std::vector<int>> ParseIntList(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 100000)
      return InvalidArgument(flag + " " + text +
                             ": expected a comma-separated list of positive integers");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) return InvalidArgument(flag + ": empty list");
  return out;
}

StatusOr<std::vector<double>> ParseNumberList(const std::string& text, const std::string& flag) {
  std::vector<double> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
      return InvalidArgument(flag + " " + text +
                             ": expected a comma-separated list of positive numbers");
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument(flag + ": empty list");
  return out;
}

StatusOr<Url> ParseUrl(const std::string& text) {
  const std::string bad = "--url " + text + ": expected http://HOST:PORT (or grpc://HOST:PORT)";
  const size_t sep = text.find("://");
  if (sep == std::string::npos || sep == 0) return InvalidArgument(bad);
  Url url;
  for (char c : text.substr(0, sep)) url.scheme.push_back(static_cast<char>(std::tolower(c)));
  std::string rest = text.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty() || rest.find('/') != std::string::npos) return InvalidArgument(bad);
  size_t colon = rest.rfind(':');
  if (rest.front() == '[') {  // [v6 address]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) return InvalidArgument(bad);
    colon = rest.find(':', close);
  }
  url.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) return InvalidArgument(bad);
    url.port = static_cast<int>(p);
  } else {
    url.port = url.scheme == "https" ? 443 : url.scheme == "grpc" ? 8001 : 80;
  }
  if (url.host.empty()) return InvalidArgument(bad);
  return url;
}

StatusOr<std::pair<int, int>> ParseRange(const std::string& text, const std::string& flag) {
  int lo = 0, hi = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d:%d%c", &lo, &hi, &extra) != 2 || lo < 1 || hi < lo)
    return InvalidArgument(flag + " " + text + ": expected MIN:MAX with 1 <= MIN <= MAX");
  return std::make_pair(lo, hi);
}

int64_t StepResult::error_count() const {
  int64_t n = 0;
  for (const auto& [status, count] : errors) n += count;
  return n;
}

std::string StepResult::label() const {
  if (concurrency > 0) return "c=" + std::to_string(concurrency);
  return "r=" + Num(request_rate, request_rate == std::floor(request_rate) ? 0 : 1);
}

void Summarize(std::vector<double> latencies_ms, StepResult& step) {
  step.requests = static_cast<int64_t>(latencies_ms.size());
  if (step.duration_s > 0) {
    step.requests_per_s = step.requests / step.duration_s;
    step.sequences_per_s = step.sequences / step.duration_s;
  }
  if (latencies_ms.empty()) return;
  double total = 0;
  for (double v : latencies_ms) total += v;
  step.mean_ms = total / latencies_ms.size();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  step.p50_ms = Percentile(latencies_ms, 0.50);
  step.p90_ms = Percentile(latencies_ms, 0.90);
  step.p99_ms = Percentile(latencies_ms, 0.99);
  step.max_ms = latencies_ms.back();
}

nlohmann::json StepToJson(const StepResult& s) {
  nlohmann::json j = {
      {"label", s.label()},
      {"duration_s", s.duration_s},
      {"requests", s.requests},
      {"sequences", s.sequences},
      {"requests_per_s", s.requests_per_s},
      {"sequences_per_s", s.sequences_per_s},
      {"latency_ms",
       {{"mean", s.mean_ms},
        {"p50", s.p50_ms},
        {"p90", s.p90_ms},
        {"p99", s.p99_ms},
        {"max", s.max_ms}}},
      {"errors", s.errors},
      {"error_count", s.error_count()},
      {"error_messages", s.error_messages},
  };
  if (s.concurrency > 0) {
    j["concurrency"] = s.concurrency;
  } else {
    j["request_rate"] = s.request_rate;
    j["request_distribution"] = RequestDistributionName(s.distribution);
    j["late_sends"] = s.late_sends;
  }
  if (s.has_server_split)
    j["server"] = {{"queue_ms", s.server_queue_ms},
                   {"compute_ms", s.server_compute_ms},
                   {"requests", s.server_requests},
                   {"stages_ms", s.server_stage_ms}};
  else
    j["server"] = nullptr;
  return j;
}

const char* RequestDistributionName(RequestDistribution d) {
  return d == RequestDistribution::kConstant ? "constant" : "poisson";
}

StatusOr<RequestDistribution> ParseRequestDistribution(const std::string& text) {
  if (text == "poisson") return RequestDistribution::kPoisson;
  if (text == "constant") return RequestDistribution::kConstant;
  return InvalidArgument("request distribution '" + text + "': expected poisson or constant");
}

StatusOr<StepResult> StepFromJson(const nlohmann::json& j) {
  StepResult s;
  try {
    s.concurrency = j.value("concurrency", 0);
    s.request_rate = j.value("request_rate", 0.0);
    ASSIGN_OR_RETURN(s.distribution, ParseRequestDistribution(
                                         j.value("request_distribution", std::string("poisson"))));
    s.duration_s = j.at("duration_s").get<double>();
    s.requests = j.at("requests").get<int64_t>();
    s.sequences = j.at("sequences").get<int64_t>();
    s.requests_per_s = j.at("requests_per_s").get<double>();
    s.sequences_per_s = j.at("sequences_per_s").get<double>();
    const auto& l = j.at("latency_ms");
    s.mean_ms = l.at("mean").get<double>();
    s.p50_ms = l.at("p50").get<double>();
    s.p90_ms = l.at("p90").get<double>();
    s.p99_ms = l.at("p99").get<double>();
    s.max_ms = l.at("max").get<double>();
    s.errors = j.at("errors").get<std::map<std::string, int64_t>>();
    s.error_messages = j.value("error_messages", std::map<std::string, std::string>{});
    s.late_sends = j.value("late_sends", int64_t{0});
    if (j.contains("server") && j["server"].is_object()) {
      s.has_server_split = true;
      s.server_queue_ms = j["server"].at("queue_ms").get<double>();
      s.server_compute_ms = j["server"].at("compute_ms").get<double>();
      s.server_requests = j["server"].at("requests").get<double>();
      s.server_stage_ms =
          j["server"].value("stages_ms", std::map<std::string, double>{});
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("not a bench step: ") + e.what());
  }
  if (s.concurrency <= 0 && s.request_rate <= 0)
    return InvalidArgument("a bench step needs a concurrency or a request_rate");
  return s;
}

std::string TableHeader() {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-8s %8s %9s %9s %8s %8s %8s %8s %8s %8s %9s %7s", "step",
                "req/s", "seq/s", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "queue_ms",
                "comp_ms", "requests", "errors");
  return buf;
}

std::string TableRow(const StepResult& s) {
  char buf[256];
  const std::string queue = s.has_server_split ? Num(s.server_queue_ms, 2) : "-";
  const std::string compute = s.has_server_split ? Num(s.server_compute_ms, 2) : "-";
  std::snprintf(buf, sizeof(buf),
                "%-8s %8.1f %9.1f %9.2f %8.2f %8.2f %8.2f %8.2f %8s %8s %9lld %7lld",
                s.label().c_str(), s.requests_per_s, s.sequences_per_s, s.mean_ms, s.p50_ms,
                s.p90_ms, s.p99_ms, s.max_ms, queue.c_str(), compute.c_str(),
                static_cast<long long>(s.requests), static_cast<long long>(s.error_count()));
  return buf;
}

std::string RenderSvg(const std::string& title, const std::vector<Series>& series) {
  constexpr double kW = 720, kH = 440, kLeft = 70, kRight = 30, kTop = 40, kBottom = 50;
  const double plot_w = kW - kLeft - kRight, plot_h = kH - kTop - kBottom;
  double max_x = 0, max_y = 0;
  for (const Series& s : series)
    for (const StepResult& st : s.steps) {
      max_x = std::max(max_x, st.sequences_per_s);
      max_y = std::max(max_y, st.p99_ms);
    }
  // Axis ends at a round number: 1, 2 or 5 times a power of ten.
  auto nice = [](double v) {
    if (v <= 0) return 1.0;
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (m * p >= v) return m * p;
    return 10 * p;
  };
  max_x = nice(max_x * 1.05);
  max_y = nice(max_y * 1.05);
  auto px = [&](double x) { return kLeft + plot_w * x / max_x; };
  auto py = [&](double y) { return kTop + plot_h * (1 - y / max_y); };
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << kW << "\" height=\""
    << kH << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">"
    << XmlEscape(title) << "</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double x = max_x * i / 5, y = max_y * i / 5;
    o << "<line x1=\"" << px(x) << "\" y1=\"" << kTop << "\" x2=\"" << px(x) << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"#eee\"/>\n"
      << "<text x=\"" << px(x) << "\" y=\"" << kTop + plot_h + 16 << "\" text-anchor=\"middle\">"
      << Num(x, max_x < 10 ? 1 : 0) << "</text>\n"
      << "<line x1=\"" << kLeft << "\" y1=\"" << py(y) << "\" x2=\"" << kLeft + plot_w << "\" y2=\""
      << py(y) << "\" stroke=\"#eee\"/>\n"
      << "<text x=\"" << kLeft - 6 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">"
      << Num(y, max_y < 10 ? 1 : 0) << "</text>\n";
  }
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\""
    << plot_h << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kH - 12
    << "\" text-anchor=\"middle\">throughput (sequences/s)</text>\n"
    << "<text transform=\"translate(18," << kTop + plot_h / 2
    << ") rotate(-90)\" text-anchor=\"middle\">p99 latency (ms)</text>\n";
  for (size_t s = 0; s < series.size(); ++s) {
    const char* color = colors[s % 5];
    std::string points;
    for (const StepResult& st : series[s].steps)
      points += Num(px(st.sequences_per_s), 1) + "," + Num(py(st.p99_ms), 1) + " ";
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"" << points
      << "\"/>\n";
    for (const StepResult& st : series[s].steps)
      o << "<circle cx=\"" << Num(px(st.sequences_per_s), 1) << "\" cy=\"" << Num(py(st.p99_ms), 1)
        << "\" r=\"3\" fill=\"" << color << "\"/>\n"
        << "<text x=\"" << Num(px(st.sequences_per_s) + 5, 1) << "\" y=\""
        << Num(py(st.p99_ms) - 5, 1) << "\" font-size=\"10\" fill=\"" << color << "\">"
        << XmlEscape(st.label()) << "</text>\n";
    // The legend, top left inside the plot: curves rise to the right, so
    // that corner stays clear, and long target names have the plot's width.
    const double ly = kTop + 18 + 18 * s;
    o << "<line x1=\"" << kLeft + 10 << "\" y1=\"" << ly - 4 << "\" x2=\"" << kLeft + 30
      << "\" y2=\"" << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n"
      << "<text x=\"" << kLeft + 34 << "\" y=\"" << ly << "\">" << XmlEscape(series[s].name)
      << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace bertrt::loadgen

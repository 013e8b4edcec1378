// The load generator's pure pieces, and its driver against a fake target.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <thread>

#include "loadgen/load_driver.h"
#include "loadgen/load_stats.h"

namespace bertrt::loadgen {
namespace {

TEST(Percentile, NearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  EXPECT_EQ(Percentile(v, 0.50), 50);
  EXPECT_EQ(Percentile(v, 0.90), 90);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 1.0), 100);
  EXPECT_EQ(Percentile(v, 0.0), 1);
  EXPECT_EQ(Percentile({7}, 0.99), 7);
  EXPECT_EQ(Percentile({}, 0.5), 0);
  // Never a value no request had: p50 of {1, 2} is 1, not 1.5.
  EXPECT_EQ(Percentile({2, 1}, 0.5), 1);
}

TEST(Summarize, OrderedPercentilesAndRates) {
  StepResult s;
  s.duration_s = 2;
  s.sequences = 30;
  Summarize({5, 1, 3, 2, 4, 100}, s);
  EXPECT_EQ(s.requests, 6);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 3);
  EXPECT_DOUBLE_EQ(s.sequences_per_s, 15);
  EXPECT_LE(s.p50_ms, s.p90_ms);
  EXPECT_LE(s.p90_ms, s.p99_ms);
  EXPECT_EQ(s.max_ms, 100);
  EXPECT_NEAR(s.mean_ms, 115.0 / 6, 1e-12);
}

constexpr const char* kMetrics = R"(# HELP bertrt_queue_duration_seconds Time a request waited.
# TYPE bertrt_queue_duration_seconds histogram
bertrt_queue_duration_seconds_bucket{model="a",le="0.001"} 3
bertrt_queue_duration_seconds_bucket{model="a",le="+Inf"} 4
bertrt_queue_duration_seconds_sum{model="a"} 0.5
bertrt_queue_duration_seconds_count{model="a"} 4
bertrt_queue_duration_seconds_sum{model="b \"x\", y"} 0.25
bertrt_queue_duration_seconds_count{model="b \"x\", y"} 2
bertrt_compute_duration_seconds_sum{model="a"} 1.5
bertrt_compute_duration_seconds_count{model="a"} 4
bertrt_compute_duration_seconds_sum{model="b \"x\", y"} 2e-1
bertrt_compute_duration_seconds_count{model="b \"x\", y"} 2
bertrt_inflight_requests 3
bertrt_request_stage_seconds_sum{model="a",stage="parse"} 0.002
bertrt_request_stage_seconds_count{model="a",stage="parse"} 4
bertrt_request_stage_seconds_sum{model="a",stage="queue"} 0.5
bertrt_request_stage_seconds_count{model="a",stage="queue"} 4
bertrt_request_stage_seconds_sum{model="b \"x\", y",stage="queue"} 9
bertrt_request_stage_seconds_count{model="b \"x\", y",stage="queue"} 9
)";

TEST(SumMetric, ByModelAndOverAll) {
  EXPECT_DOUBLE_EQ(*SumMetric(kMetrics, "bertrt_queue_duration_seconds_sum", "a"), 0.5);
  EXPECT_DOUBLE_EQ(*SumMetric(kMetrics, "bertrt_queue_duration_seconds_sum", "b \"x\", y"), 0.25);
  EXPECT_DOUBLE_EQ(*SumMetric(kMetrics, "bertrt_queue_duration_seconds_sum", ""), 0.75);
  EXPECT_DOUBLE_EQ(*SumMetric(kMetrics, "bertrt_inflight_requests", ""), 3);
  // A prefix of a name is not the name.
  EXPECT_EQ(SumMetric(kMetrics, "bertrt_queue_duration_seconds", "").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(SumMetric(kMetrics, "bertrt_queue_duration_seconds_sum", "c").status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(SumMetric("m{model=\"a} 1\n", "m", "").ok());
}

TEST(ParseServerTotals, QueueComputeAndCount) {
  auto t = ParseServerTotals(kMetrics, "a");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_DOUBLE_EQ(t->queue_seconds, 0.5);
  EXPECT_DOUBLE_EQ(t->compute_seconds, 1.5);
  EXPECT_DOUBLE_EQ(t->requests, 4);
  // Each request stage's sum and count, the model's alone.
  ASSERT_EQ(t->stages.size(), 2u);
  EXPECT_DOUBLE_EQ(t->stages["parse"].first, 0.002);
  EXPECT_DOUBLE_EQ(t->stages["queue"].first, 0.5);
  EXPECT_DOUBLE_EQ(t->stages["queue"].second, 4);
  EXPECT_FALSE(ParseServerTotals("# nothing\n", "").ok());
}

TEST(GenerateTexts, LengthsInRangeAndDeterministic) {
  auto texts = GenerateTexts(500, 3, 9, 42);
  ASSERT_EQ(texts.size(), 500u);
  int seen_min = 100, seen_max = 0;
  for (const std::string& t : texts) {
    std::istringstream in(t);
    int words = 0;
    for (std::string w; in >> w;) ++words;
    seen_min = std::min(seen_min, words);
    seen_max = std::max(seen_max, words);
    EXPECT_EQ(t.find("  "), std::string::npos);
  }
  EXPECT_EQ(seen_min, 3);
  EXPECT_EQ(seen_max, 9);
  EXPECT_EQ(texts, GenerateTexts(500, 3, 9, 42));
  EXPECT_NE(texts, GenerateTexts(500, 3, 9, 43));
  for (const std::string& t : GenerateTexts(20, 5, 5, 1)) {
    std::istringstream in(t);
    int words = 0;
    for (std::string w; in >> w;) ++words;
    EXPECT_EQ(words, 5);
  }
}

TEST(ParseFlags, ListsRangesUrls) {
  EXPECT_EQ(*ParseIntList("1,4,16", "--concurrency"), (std::vector<int>{1, 4, 16}));
  EXPECT_FALSE(ParseIntList("1,,4", "--concurrency").ok());
  EXPECT_FALSE(ParseIntList("0", "--concurrency").ok());
  EXPECT_FALSE(ParseIntList("2x", "--concurrency").ok());
  EXPECT_EQ(*ParseNumberList("12.5,50", "--request-rate"), (std::vector<double>{12.5, 50}));
  EXPECT_FALSE(ParseNumberList("-1", "--request-rate").ok());
  EXPECT_EQ(*ParseRange("3:9", "--lengths"), std::make_pair(3, 9));
  EXPECT_FALSE(ParseRange("9:3", "--lengths").ok());
  auto u = ParseUrl("HTTP://127.0.0.1:8000/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(ParseUrl("grpc://localhost")->port, 8001);
  EXPECT_EQ(ParseUrl("http://[::1]:9")->host, "[::1]");
  EXPECT_FALSE(ParseUrl("localhost:8000").ok());
  EXPECT_FALSE(ParseUrl("http://h:0").ok());
  EXPECT_FALSE(ParseUrl("http://h:80/v2").ok());
}

TEST(StepJson, RoundTrips) {
  StepResult s;
  s.concurrency = 4;
  s.duration_s = 1;
  s.sequences = 10;
  Summarize({1, 2, 3}, s);
  s.errors["429"] = 2;
  s.has_server_split = true;
  s.server_queue_ms = 0.5;
  s.server_compute_ms = 1.5;
  s.server_requests = 3;
  auto back = StepFromJson(StepToJson(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->label(), "c=4");
  EXPECT_EQ(back->errors.at("429"), 2);
  EXPECT_EQ(back->error_count(), 2);
  EXPECT_DOUBLE_EQ(back->p99_ms, s.p99_ms);
  EXPECT_DOUBLE_EQ(back->server_compute_ms, 1.5);
  EXPECT_FALSE(StepFromJson(nlohmann::json{{"x", 1}}).ok());

  StepResult open;
  open.request_rate = 50;
  open.distribution = RequestDistribution::kConstant;
  auto open_back = StepFromJson(StepToJson(open));
  ASSERT_TRUE(open_back.ok()) << open_back.status().message();
  EXPECT_EQ(open_back->distribution, RequestDistribution::kConstant);
  nlohmann::json bad = StepToJson(open);
  bad["request_distribution"] = "uniform";
  EXPECT_FALSE(StepFromJson(bad).ok());
}

TEST(RenderSvg, EscapesAndHasEveryPoint) {
  StepResult a, b;
  a.concurrency = 1;
  a.sequences_per_s = 10;
  a.p99_ms = 3;
  b.concurrency = 2;
  b.sequences_per_s = 18;
  b.p99_ms = 5;
  const std::string svg = RenderSvg("t <&>", {{"x & y", {a, b}}});
  EXPECT_NE(svg.find("t &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("x &amp; y"), std::string::npos);
  EXPECT_NE(svg.find(">c=1<"), std::string::npos);
  EXPECT_NE(svg.find(">c=2<"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

// A server of one 2 ms "engine" per client that refuses every third request
// (429), counting its queue/compute like /metrics would.
class FakeTarget : public Target {
 public:
  std::string Describe() const override { return "fake"; }
  StatusOr<std::unique_ptr<Client>> NewClient() override {
    return std::unique_ptr<Client>(std::make_unique<FakeClient>(*this));
  }
  StatusOr<ServerTotals> Totals() override {
    std::lock_guard lock(mu_);
    return totals_;
  }
  std::atomic<int> sent{0};
  std::atomic<size_t> max_texts{0};
  std::atomic<int> clients_used{0};  // clients that sent at least once

 private:
  class FakeClient : public Client {
   public:
    explicit FakeClient(FakeTarget& t) : t_(t) {}
    Outcome Send(const std::vector<std::string>& texts) override {
      if (!used_) t_.clients_used.fetch_add(1);
      used_ = true;
      t_.max_texts = std::max(t_.max_texts.load(), texts.size());
      if (t_.sent.fetch_add(1) % 3 == 2) return {429, "queue full"};
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::lock_guard lock(t_.mu_);
      t_.totals_.queue_seconds += 0.001;
      t_.totals_.compute_seconds += 0.002;
      t_.totals_.requests += 1;
      return {};
    }

   private:
    FakeTarget& t_;
    bool used_ = false;
  };
  std::mutex mu_;
  ServerTotals totals_;
};

TEST(RunStep, ClosedLoopCountsErrorsAndSplit) {
  FakeTarget target;
  TextPool pool({"a", "b", "c"});
  StepOptions o;
  o.concurrency = 4;
  o.warmup_s = 0.05;
  o.duration_s = 0.3;
  o.sequences_per_request = 2;
  auto step = RunStep(target, pool, o);
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_EQ(step->concurrency, 4);
  EXPECT_GT(step->requests, 20);
  EXPECT_EQ(step->sequences, 2 * step->requests);
  EXPECT_GT(step->errors.at("429"), 0);
  EXPECT_EQ(step->error_messages.at("429"), "queue full");
  EXPECT_GE(step->p50_ms, 1.9);
  EXPECT_LE(step->p50_ms, step->p99_ms);
  ASSERT_TRUE(step->has_server_split);
  EXPECT_NEAR(step->server_queue_ms, 1.0, 1e-6);
  EXPECT_NEAR(step->server_compute_ms, 2.0, 1e-6);
  EXPECT_EQ(target.max_texts.load(), 2u);
}

// One second of 200 requests/s arriving as `distribution` says.
StatusOr<StepResult> OpenLoopAt200(RequestDistribution distribution) {
  FakeTarget target;
  TextPool pool({"a"});
  StepOptions o;
  o.request_rate = 200;
  o.distribution = distribution;
  o.warmup_s = 0.1;
  o.duration_s = 1.0;
  o.max_inflight = 8;
  return RunStep(target, pool, o);
}

TEST(RunStep, OpenLoopFollowsTheRate) {
  auto step = OpenLoopAt200(RequestDistribution::kPoisson);
  ASSERT_TRUE(step.ok()) << step.status().message();
  // 200/s for 1 s: Poisson, so about 200 +- 3 sigma (42) answers and errors.
  const int64_t answered = step->requests + step->error_count();
  EXPECT_GT(answered, 150);
  EXPECT_LT(answered, 250);
  EXPECT_EQ(step->label(), "r=200");
}

TEST(RunStep, ConstantArrivalsAreEvenlySpaced) {
  auto step = OpenLoopAt200(RequestDistribution::kConstant);
  ASSERT_TRUE(step.ok()) << step.status().message();
  // One arrival every 5 ms: 200 in the second, give or take the window's
  // edges and a scheduling hiccup (Poisson would spread +- 42).
  const int64_t answered = step->requests + step->error_count();
  EXPECT_GE(answered, 190);
  EXPECT_LE(answered, 210);
  EXPECT_EQ(step->distribution, RequestDistribution::kConstant);
}

// An arrival goes to the worker that became idle last: at 200/s with 2 ms
// answers one connection carries nearly all requests, however many workers
// may be outstanding (before, each of the 64 took every 64th arrival, so a
// server saw a new connection per request).
TEST(RunStep, OpenLoopReusesIdleConnections) {
  FakeTarget target;
  TextPool pool({"a"});
  StepOptions o;
  o.request_rate = 200;
  o.distribution = RequestDistribution::kConstant;
  o.warmup_s = 0.1;
  o.duration_s = 0.5;
  o.max_inflight = 64;
  auto step = RunStep(target, pool, o);
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_GT(step->requests + step->error_count(), 80);
  EXPECT_LE(target.clients_used.load(), 3);
}

TEST(RunStep, RequestsEndTheWindow) {
  FakeTarget target;
  TextPool pool({"a"});
  StepOptions o;
  o.concurrency = 2;
  o.warmup_s = 0;
  o.duration_s = 100;  // ignored: --requests ends it
  o.requests = 30;
  auto step = RunStep(target, pool, o);
  ASSERT_TRUE(step.ok());
  EXPECT_GE(step->requests + step->error_count(), 30);
  EXPECT_LT(step->duration_s, 5);
}

}  // namespace
}  // namespace bertrt::loadgen

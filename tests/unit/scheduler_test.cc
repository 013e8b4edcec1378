// The dynamic batcher on the real CPU engine and a tiny model: requests are
// batched together, each gets exactly what it would get alone, a full queue
// rejects at once, and requests past their timeout are dropped before compute.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "bertrt/importer.h"

namespace bertrt {
namespace {

// Wraps the real engine: records batch sizes and can hold each batch back,
// or fail one.
class RecordingEngine : public Engine {
 public:
  RecordingEngine(std::unique_ptr<Engine> inner, std::chrono::milliseconds delay)
      : inner_(std::move(inner)), delay_(delay) {}
  StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) override {
    std::this_thread::sleep_for(delay_);
    max_seqs_ = std::max(max_seqs_.load(), batch.num_seqs());
    max_tokens_ = std::max(max_tokens_.load(), batch.num_tokens());
    if (++batches_ == fail_batch_)
      return Internal("batch " + std::to_string(fail_batch_) + " failed");
    return inner_->Run(batch, options);
  }
  const ModelConfig& config() const override { return inner_->config(); }
  std::string device() const override { return inner_->device(); }
  size_t PeakMemoryBytes() const override { return inner_->PeakMemoryBytes(); }

  std::atomic<int> max_seqs_{0};
  std::atomic<int> max_tokens_{0};
  std::atomic<int> batches_{0};
  std::atomic<int> fail_batch_{0};  // the batch (counted from 1) to fail; 0: none

 private:
  std::unique_ptr<Engine> inner_;
  std::chrono::milliseconds delay_;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = LoadModelAndTokenizer(std::string(BERTRT_TEST_DATA_DIR) + "/models/token_cls");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    loaded_ = *loaded;
  }

  std::unique_ptr<Scheduler> Make(SchedulerOptions options, std::chrono::milliseconds delay,
                                  RecordingEngine** out = nullptr) {
    auto engine = CreateCpuEngine(loaded_.model, CpuEngineOptions{1});
    EXPECT_TRUE(engine.ok());
    auto recording = std::make_unique<RecordingEngine>(std::move(*engine), delay);
    if (out) *out = recording.get();
    std::vector<std::unique_ptr<Engine>> engines;
    engines.push_back(std::move(recording));
    return std::make_unique<Scheduler>(std::move(engines), std::move(options));
  }

  InferRequest Request(const std::string& text) { return Request(std::vector<std::string>{text}); }
  InferRequest Request(const std::vector<std::string>& texts) {
    InferRequest r;
    for (const std::string& text : texts) {
      auto enc = loaded_.tokenizer->Encode(text);
      EXPECT_TRUE(enc.ok());
      r.sequences.push_back({enc->input_ids, enc->token_type_ids});
    }
    return r;
  }

  LoadedModel loaded_;
};

std::string Text(int i) {
  std::string t = "request number " + std::to_string(i);
  for (int k = 0; k < i % 7; ++k) t += " hello world";
  return t;
}

TEST_F(SchedulerTest, ConcurrentRequestsShareBatchesAndGetTheirOwnOutputs) {
  SchedulerOptions options;
  options.max_queue_delay = std::chrono::milliseconds(50);
  RecordingEngine* engine = nullptr;
  auto scheduler = Make(options, std::chrono::milliseconds(0), &engine);
  constexpr int kRequests = 24;
  std::vector<std::vector<float>> alone(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    auto r = scheduler->Infer(Request(Text(i)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    alone[i] = r->outputs.Find("logits")->data;
  }
  const int batches_alone = engine->batches_;
  EXPECT_EQ(batches_alone, kRequests);

  std::vector<std::future<StatusOr<InferResult>>> futures;
  for (int i = 0; i < kRequests; ++i) futures.push_back(scheduler->Submit(Request(Text(i))));
  for (int i = 0; i < kRequests; ++i) {
    auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const NamedOutput* logits = r->outputs.Find("logits");
    ASSERT_TRUE(logits->per_token);
    EXPECT_EQ(static_cast<int>(logits->data.size()), r->cu_seqlens.back() * logits->width);
    ASSERT_EQ(logits->data.size(), alone[i].size()) << i;
    for (size_t k = 0; k < alone[i].size(); ++k) EXPECT_NEAR(logits->data[k], alone[i][k], 1e-5f);
  }
  EXPECT_GT(engine->max_seqs_, 1);
  EXPECT_LT(engine->batches_ - batches_alone, kRequests);
}

TEST_F(SchedulerTest, BatchesRespectTheSizeCap) {
  SchedulerOptions options;
  options.max_batch_size = 3;
  options.max_queue_delay = std::chrono::milliseconds(20);
  RecordingEngine* engine = nullptr;
  auto scheduler = Make(options, std::chrono::milliseconds(0), &engine);
  std::vector<std::future<StatusOr<InferResult>>> futures;
  for (int i = 0; i < 10; ++i) futures.push_back(scheduler->Submit(Request(Text(i))));
  for (auto& f : futures) EXPECT_TRUE(f.get().ok());
  EXPECT_LE(engine->max_seqs_, 3);
}

TEST_F(SchedulerTest, PreferredBatchSizeLeavesWithoutWaiting) {
  SchedulerOptions options;
  options.max_queue_delay = std::chrono::seconds(5);
  options.preferred_batch_sizes = {4};
  RecordingEngine* engine = nullptr;
  auto scheduler = Make(options, std::chrono::milliseconds(0), &engine);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<StatusOr<InferResult>>> futures;
  for (int i = 0; i < 4; ++i) futures.push_back(scheduler->Submit(Request(Text(i))));
  for (auto& f : futures) EXPECT_TRUE(f.get().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(engine->batches_, 1);
  EXPECT_EQ(engine->max_seqs_, 4);
}

TEST_F(SchedulerTest, RequestsWithAndWithoutTheModelsNormalizeNeverShareABatch) {
  // A model whose vector goes through Dense and Normalize modules: a run
  // without the Normalize gives each request its vector before it.
  auto loaded = LoadModelAndTokenizer(std::string(BERTRT_TEST_DATA_DIR) +
                                      "/models/st_weightedmean_dense");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  loaded_ = *loaded;
  SchedulerOptions options;
  options.max_queue_delay = std::chrono::milliseconds(200);
  RecordingEngine* engine = nullptr;
  auto scheduler = Make(options, std::chrono::milliseconds(0), &engine);
  constexpr int kRequests = 8;
  auto request = [&](int i) {
    InferRequest r = Request(Text(i));
    r.run.normalize = i % 2 == 0;
    return r;
  };
  std::vector<std::vector<float>> alone(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    auto r = scheduler->Infer(request(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    alone[i] = r->outputs.Find("embedding")->data;
  }
  engine->max_seqs_ = 0;
  std::vector<std::future<StatusOr<InferResult>>> futures;
  for (int i = 0; i < kRequests; ++i) futures.push_back(scheduler->Submit(request(i)));
  for (int i = 0; i < kRequests; ++i) {
    auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::vector<float>& got = r->outputs.Find("embedding")->data;
    double norm = 0;
    for (float v : got) norm += double(v) * v;
    // Each as it was alone: unit vectors where normalized, others not.
    EXPECT_EQ(std::abs(std::sqrt(norm) - 1) < 1e-4, i % 2 == 0)
        << i << ": norm " << std::sqrt(norm);
    ASSERT_EQ(got.size(), alone[i].size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], alone[i][k], 1e-5f) << i;
  }
  // Queued together, they still ran in batches of one kind each.
  EXPECT_LE(engine->max_seqs_, kRequests / 2);
}

TEST_F(SchedulerTest, FullQueueRejectsAtOnce) {
  SchedulerOptions options;
  options.max_queue_size = 2;
  options.max_batch_size = 1;
  options.max_queue_delay = std::chrono::microseconds(0);
  auto scheduler = Make(options, std::chrono::milliseconds(200));
  std::vector<std::future<StatusOr<InferResult>>> futures;
  for (int i = 0; i < 6; ++i) futures.push_back(scheduler->Submit(Request(Text(i))));
  int rejected = 0, served = 0;
  for (auto& f : futures) {
    auto r = f.get();
    if (r.ok())
      ++served;
    else if (r.status().code() == StatusCode::kResourceExhausted)
      ++rejected;
  }
  EXPECT_GE(rejected, 3);
  EXPECT_EQ(rejected + served, 6);
}

TEST_F(SchedulerTest, TimedOutRequestsAreDroppedBeforeCompute) {
  SchedulerOptions options;
  options.max_batch_size = 1;
  options.max_queue_delay = std::chrono::microseconds(0);
  options.request_timeout = std::chrono::milliseconds(50);
  RecordingEngine* engine = nullptr;
  auto scheduler = Make(options, std::chrono::milliseconds(150), &engine);
  std::vector<std::future<StatusOr<InferResult>>> futures;
  for (int i = 0; i < 4; ++i) futures.push_back(scheduler->Submit(Request(Text(i))));
  EXPECT_TRUE(futures[0].get().ok());
  int timed_out = 0;
  for (int i = 1; i < 4; ++i)
    timed_out += futures[i].get().status().code() == StatusCode::kDeadlineExceeded;
  EXPECT_EQ(timed_out, 3);
  EXPECT_EQ(engine->batches_, 1);
}

TEST_F(SchedulerTest, CancelledRequestsAreDropped) {
  SchedulerOptions options;
  options.max_queue_delay = std::chrono::milliseconds(10);
  RecordingEngine* engine = nullptr;
  auto scheduler = Make(options, std::chrono::milliseconds(0), &engine);
  InferRequest r = Request("gone");
  r.is_cancelled = [] { return true; };
  EXPECT_EQ(scheduler->Infer(std::move(r)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(engine->batches_, 0);
}

std::vector<std::string> Texts(int n) {
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) texts.push_back(Text(i));
  return texts;
}

TEST_F(SchedulerTest, ARequestLargerThanABatchRunsInPartsAndGetsItsWholeOutputs) {
  constexpr int kTexts = 9;
  auto whole =
      Make(SchedulerOptions{}, std::chrono::milliseconds(0))->Infer(Request(Texts(kTexts)));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  // Parts by sequence count (2 to a batch) and by tokens (a budget of two
  // or three of these texts).
  SchedulerOptions by_count, by_tokens;
  by_count.max_batch_size = 2;
  by_count.max_client_batch_size = kTexts;
  by_tokens.max_batch_tokens = 2 * static_cast<int>(whole->cu_seqlens[kTexts] / kTexts);
  for (const SchedulerOptions& options : {by_count, by_tokens}) {
    RecordingEngine* engine = nullptr;
    auto split =
        Make(options, std::chrono::milliseconds(0), &engine)->Infer(Request(Texts(kTexts)));
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    EXPECT_GE(engine->batches_, 4);
    EXPECT_LE(engine->max_seqs_, options.max_batch_size);
    // A budget is exceeded only by a single sequence, never by a part.
    EXPECT_TRUE(engine->max_tokens_ <= options.max_batch_tokens || engine->max_seqs_ == 1);
    EXPECT_EQ(split->cu_seqlens, whole->cu_seqlens);
    const NamedOutput* got = split->outputs.Find("logits");
    const NamedOutput* want = whole->outputs.Find("logits");
    ASSERT_EQ(got->data.size(), want->data.size());
    for (size_t k = 0; k < want->data.size(); ++k) EXPECT_NEAR(got->data[k], want->data[k], 1e-5f);
  }
}

// A split request's queue and compute times are its own time in the
// scheduler, parted: each part is queued once the one before is taken and
// waits while it computes, so the parts' queue times overlap their computes
// (summed, the stages came to about twice the request's time).
TEST_F(SchedulerTest, ASplitRequestsStagesAddUpToItsTime) {
  SchedulerOptions options;
  options.max_batch_size = 1;
  options.max_client_batch_size = 6;
  auto scheduler = Make(options, std::chrono::milliseconds(20));  // 20 ms a part at least
  const auto start = std::chrono::steady_clock::now();
  auto result = scheduler->Infer(Request(Texts(6)));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_GE(result->compute_seconds, 6 * 0.020);
  EXPECT_GE(result->queue_seconds, 0.0);
  EXPECT_LE(result->queue_seconds + result->compute_seconds, wall);
}

TEST_F(SchedulerTest, ASmallRequestDoesNotWaitForAllOfALargeOne) {
  SchedulerOptions options;
  options.max_batch_size = 1;
  options.max_client_batch_size = 8;
  auto scheduler = Make(options, std::chrono::milliseconds(50));
  auto large = scheduler->Submit(Request(Texts(8)));  // 8 parts, 50 ms each
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto start = std::chrono::steady_clock::now();
  auto small = scheduler->Submit(Request("one word"));
  ASSERT_TRUE(small.get().ok());
  // Behind the part running when it came and at most the one queued then;
  // all of the large request would be 8 x 50 ms.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  EXPECT_NE(large.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_TRUE(large.get().ok());
}

TEST_F(SchedulerTest, AFailedPartFailsItsRequestOnceAndStopsTheRest) {
  SchedulerOptions options;
  options.max_batch_size = 1;
  options.max_client_batch_size = 6;
  RecordingEngine* engine = nullptr;
  auto scheduler = Make(options, std::chrono::milliseconds(0), &engine);
  engine->fail_batch_ = 2;
  auto r = scheduler->Infer(Request(Texts(6)));
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  // At most the part queued when the second ran computes after it.
  EXPECT_LE(engine->batches_, 3);
  EXPECT_TRUE(scheduler->Infer(Request("next")).ok());
}

TEST_F(SchedulerTest, BadIdsAreRejectedAndShutdownDrains) {
  auto scheduler = Make(SchedulerOptions{}, std::chrono::milliseconds(20));
  InferRequest bad;
  bad.sequences.push_back({{2, 100000, 3}, {0, 0, 0}});
  EXPECT_EQ(scheduler->Infer(std::move(bad)).status().code(), StatusCode::kInvalidArgument);
  auto pending = scheduler->Submit(Request("still computed"));
  scheduler->Shutdown();
  EXPECT_TRUE(pending.get().ok());
  EXPECT_EQ(scheduler->Infer(Request("late")).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace bertrt

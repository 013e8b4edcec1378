// The dynamic batcher on the real CPU engine and a tiny model: requests are
// batched together, each gets exactly what it would get alone, a full queue
// rejects at once, and requests past their timeout are dropped before compute.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "bertrt/importer.h"

namespace bertrt {
namespace {

// Wraps the real engine: records batch sizes and can hold each batch back.
class RecordingEngine : public Engine {
 public:
  RecordingEngine(std::unique_ptr<Engine> inner, std::chrono::milliseconds delay)
      : inner_(std::move(inner)), delay_(delay) {}
  StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) override {
    std::this_thread::sleep_for(delay_);
    max_seqs_ = std::max(max_seqs_.load(), batch.num_seqs());
    ++batches_;
    return inner_->Run(batch, options);
  }
  const ModelConfig& config() const override { return inner_->config(); }
  std::string device() const override { return inner_->device(); }
  size_t PeakMemoryBytes() const override { return inner_->PeakMemoryBytes(); }

  std::atomic<int> max_seqs_{0};
  std::atomic<int> batches_{0};

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

  InferRequest Request(const std::string& text) {
    auto enc = loaded_.tokenizer->Encode(text);
    EXPECT_TRUE(enc.ok());
    InferRequest r;
    r.sequences.push_back({enc->input_ids, enc->token_type_ids});
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

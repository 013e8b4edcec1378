// Probe (not part of the build): would a forward split into sub-batches that
// run side by side on the GPU beat one forward over the whole batch? The
// ragged 32 x 16..128 batch's N = 768 GEMMs fill 114 of 132 SMs and its
// attention costs what 32 x 128's does (bench/NOTES.md), so kernels of one
// sub-batch might fill what another leaves idle. Approximated here without
// touching the engine: P CUDA engines (each its own stream and graphs), each
// running 1/P of the batch's sequences from its own thread, started together;
// a run's time is the last one's end. Against one engine on the whole batch.
//   build: see scripts/device_concurrent_probe.sh (links build-lead's libbertrt.a)
//   run:   concurrent_halves MODEL_DIR
// Results (H200): bench/RESULTS.md.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "bertrt/cuda_engine.h"
#include "bertrt/importer.h"

using namespace bertrt;
using Clock = std::chrono::steady_clock;

namespace {

RaggedBatch RandomBatch(const ModelConfig& config, int seqs, int min_len, int max_len,
                        std::mt19937& rng) {
  std::uniform_int_distribution<int> len_dist(min_len, max_len), id_dist(1000, config.vocab_size - 1);
  RaggedBatch batch;
  for (int s = 0; s < seqs; ++s) {
    std::vector<int32_t> ids(len_dist(rng)), types(ids.size(), 0);
    for (int32_t& id : ids) id = id_dist(rng);
    batch.Add(ids, types);
  }
  return batch;
}

// Deals the sequences, longest first, to the part with the fewest tokens so far.
std::vector<RaggedBatch> Split(const RaggedBatch& batch, int parts) {
  std::vector<int> order(batch.num_seqs());
  for (int i = 0; i < batch.num_seqs(); ++i) order[i] = i;
  auto len = [&](int i) { return batch.cu_seqlens[i + 1] - batch.cu_seqlens[i]; };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return len(a) > len(b); });
  std::vector<RaggedBatch> out(parts);
  for (int i : order) {
    auto& part = *std::min_element(out.begin(), out.end(), [](auto& a, auto& b) {
      return a.num_tokens() < b.num_tokens();
    });
    std::vector<int32_t> ids(batch.input_ids.begin() + batch.cu_seqlens[i],
                             batch.input_ids.begin() + batch.cu_seqlens[i + 1]);
    std::vector<int32_t> types(ids.size(), 0);
    part.Add(ids, types);
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int kWarmup = 20, kRuns = 200;

double TimeParts(std::vector<std::unique_ptr<Engine>>& engines, const std::vector<RaggedBatch>& parts) {
  const int p = static_cast<int>(parts.size());
  std::vector<double> ms;
  // A run counts from the first part's start to the last part's end.
  std::vector<Clock::time_point> starts(p), ends(p);
  std::barrier go(p + 1), done(p + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < p; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kWarmup + kRuns; ++r) {
        go.arrive_and_wait();
        starts[t] = Clock::now();
        auto out = engines[t]->Run(parts[t], {});
        if (!out.ok()) {
          std::printf("run failed: %s\n", out.status().ToString().c_str());
          std::exit(1);
        }
        ends[t] = Clock::now();
        done.arrive_and_wait();
      }
    });
  for (int r = 0; r < kWarmup + kRuns; ++r) {
    if (r == kWarmup)
      for (auto& e : engines) e->WaitForBackgroundWork();
    go.arrive_and_wait();
    done.arrive_and_wait();
    if (r >= kWarmup)
      ms.push_back(std::chrono::duration<double, std::milli>(
                       *std::max_element(ends.begin(), ends.end()) -
                       *std::min_element(starts.begin(), starts.end()))
                       .count());
  }
  for (auto& t : threads) t.join();
  return Median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::printf("usage: concurrent_halves MODEL_DIR\n");
    return 2;
  }
  auto model = LoadHfModel(argv[1]);
  if (!model.ok()) {
    std::printf("%s\n", model.status().ToString().c_str());
    return 1;
  }
  CudaEngineOptions options;
  std::vector<std::unique_ptr<Engine>> engines;
  for (int i = 0; i < 4; ++i) {
    auto engine = CreateCudaEngine(*model, options);
    if (!engine.ok()) {
      std::printf("%s\n", engine.status().ToString().c_str());
      return 1;
    }
    engines.push_back(std::move(*engine));
  }
  std::printf("%-22s %6s %8s %8s %8s %8s\n", "batch", "tokens", "1 part", "2 parts", "3 parts",
              "4 parts");
  struct Case {
    const char* name;
    int seqs, lo, hi;
  };
  for (Case c : {Case{"ragged 32 x 16..128", 32, 16, 128}, Case{"32 x 128", 32, 128, 128},
                 Case{"128 x 128", 128, 128, 128}, Case{"ragged 128 x 16..128", 128, 16, 128}}) {
    std::mt19937 rng(0);
    RaggedBatch batch = RandomBatch((*model)->config, c.seqs, c.lo, c.hi, rng);
    std::printf("%-22s %6d", c.name, batch.num_tokens());
    for (int p = 1; p <= 4; ++p) {
      std::vector<std::unique_ptr<Engine>> used;
      for (int i = 0; i < p; ++i) used.push_back(std::move(engines[i]));
      std::printf(" %8.3f", TimeParts(used, Split(batch, p)));
      for (int i = 0; i < p; ++i) engines[i] = std::move(used[i]);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}

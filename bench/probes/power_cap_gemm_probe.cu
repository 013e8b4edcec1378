// Probe (not part of the build): BERT-large's GEMMs at the GPU's power cap. BERT-large at batch 256 x 384 keeps the H200 at its
// 700 W limit, so what sets its speed is the energy each GEMM takes, not its
// time at a fixed clock; a GEMM timed in short bursts (bias_gelu_gemm_probe.cu)
// runs below the cap and cannot show that. Here each way runs back to back
// for `--seconds` (CUDA graphs of 20), in interleaved rounds, and the probe
// reports its time per GEMM, the energy per GEMM (NVML's energy counter) and
// the SM clock and power at the end of the run. Ways, same operands:
//   lt tanh         cuBLASLt's GELU epilogue (tanh form: the cost to reach);
//   lt, no act      cuBLASLt's bias epilogue alone;
//   cutlass, none   the engine's tiling with no activation;
//   cutlass, gelu   the engine's GeluErf (gemm/sm90/bias_gelu_gemm.cuh, gelu_erf.h);
//   cutlass, gelu degree 7 clamped  the form before 2026-12-03's second change
//                   (a degree-7 polynomial over a clamped |x|);
//   cutlass, gelu, ...      GeluErf in other tilings and schedules;
//   cutlass, ... (timing)   GeluErf's polynomial alone, its ex2 alone: where the
//                           epilogue's cost goes (outputs not GELU, not checked).
// Each output is checked against an fp32 reference on its first and last 64
// rows (the GELU ways; the others print no error). Then BERT-large's other
// three GEMMs (QKV, attention output and FFN output with their residuals, at
// 98,304 rows): cuBLASLt's first heuristic answer against CUTLASS's
// (bias and residual in the epilogue; --others), and each of cuBLASLt's first
// `--candidates` answers: which takes the least energy?
//   nvcc -O3 -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DNDEBUG -I include -I src \
//     -I third_party/cutlass-4.2.0.0/include -I third_party/cutlass-4.2.0.0/tools/util/include \
//     bench/probes/power_cap_gemm_probe.cu -lcublasLt -ldl -o power_cap_gemm_probe
//   ./power_cap_gemm_probe [--seconds S] [--rounds R] [--candidates N] [--only-large 1]
//     [--ffn-in 0] [--others 0]
// Results (H200): bench/RESULTS.md.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../../src/core/status.cc"
#include "backends/cuda/gemm/sm90/bias_gelu_gemm.cuh"
#include "gelu_gemm_check.cuh"
#include "probe_util.h"

namespace bertrt::cuda {
bool BiasGeluGemmBuilt() { return true; }
}  // namespace bertrt::cuda

namespace probe {

using namespace cute;

using bertrt::cuda::sm90::ApplyToFragment;
using bertrt::cuda::GeluLog2Tail;

// The GELU epilogue as it was before the degree-5 fit (2026-12-03): |x|
// clamped to 4 sqrt(2), a degree-7 polynomial (Chebyshev least squares of
// log2(1 - Phi(a)), unweighted), ex2, max, fma: ten FP32 instructions.
template <class T>
struct GeluClamped7 {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE static float Act(float x) {
    const float a = fminf(fabsf(x), 5.656854249f);
    float p = -1.9931321730837226e-06f;
    p = fmaf(p, a, 6.478301656898111e-05f);
    p = fmaf(p, a, -0.0009558197925798595f);
    p = fmaf(p, a, 0.00860847532749176f);
    p = fmaf(p, a, -0.05416931211948395f);
    p = fmaf(p, a, -0.4582485258579254f);
    p = fmaf(p, a, -1.151343822479248f);
    p = fmaf(p, a, -0.9999851584434509f);
    float tail, relu;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(tail) : "f"(p));
    asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(relu) : "f"(x));
    return fmaf(-a, tail, relu);
  }
  CUTLASS_DEVICE T operator()(T const& v) const { return T(Act(float(v))); }
};

// Timing only (their outputs are not GELU): where the epilogue's cost goes.
// PolyOnly: GeluErf's polynomial, max and fma, no ex2; Ex2Only: one ex2 and
// one fma, no polynomial.
template <class T>
struct PolyOnly {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE static float Act(float x) {
    const float a = fabsf(x);
    return fmaf(-a, GeluLog2Tail(a), fmaxf(x, 0.0f));
  }
  CUTLASS_DEVICE T operator()(T const& v) const { return T(Act(float(v))); }
};
template <class T>
struct Ex2Only {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE static float Act(float x) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-fabsf(x)));
    return fmaf(-x, e, fmaxf(x, 0.0f));
  }
  CUTLASS_DEVICE T operator()(T const& v) const { return T(Act(float(v))); }
};
// ... and over CUTLASS's fragments.
template <class T, int N>
struct GeluClamped7<cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& v) const {
    return ApplyToFragment<probe::GeluClamped7>(v);
  }
};
template <class T, int N>
struct PolyOnly<cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& v) const {
    return ApplyToFragment<probe::PolyOnly>(v);
  }
};
template <class T, int N>
struct Ex2Only<cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;
  CUTLASS_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& v) const {
    return ApplyToFragment<probe::Ex2Only>(v);
  }
};

// The engine's tiling (bias_gelu_gemm.cu): ping-pong 128 x 128, cluster 1 x 2;
// and the others the probe compares it with.
template <template <class> class Act, class Tile = Shape<_128, _128, _64>,
          class Cluster = Shape<_1, _2, _1>,
          class Schedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong,
          class EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized, bool kResidual = false>
using EngineKernel =
    bertrt::cuda::sm90::BiasGeluGemmKernel<cutlass::half_t, Tile, Cluster, Schedule,
                                           EpilogueSchedule, Act, kResidual>;
using cutlass::epilogue::thread::Identity;
// The other GEMMs through CUTLASS (bias, and the residual as C): the
// engine's tiling, clusters along M instead, and 256 x 128 tiles.
template <bool kResidual>
using PingPong12 = EngineKernel<Identity, Shape<_128, _128, _64>, Shape<_1, _2, _1>,
                                cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                cutlass::epilogue::TmaWarpSpecialized, kResidual>;
template <bool kResidual>
using PingPong21 = EngineKernel<Identity, Shape<_128, _128, _64>, Shape<_2, _1, _1>,
                                cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                cutlass::epilogue::TmaWarpSpecialized, kResidual>;
template <bool kResidual>
using Cooperative256 = EngineKernel<Identity, Shape<_256, _128, _64>, Shape<_1, _2, _1>,
                                    cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                    cutlass::epilogue::TmaWarpSpecializedCooperative, kResidual>;
using bertrt::cuda::sm90::GeluErf;

// NVML through dlopen: the driver's library, no header needed.
struct Nvml {
  using Device = void*;
  int (*get_energy)(Device, unsigned long long*) = nullptr;  // mJ since the driver loaded
  int (*get_clock)(Device, int, unsigned*) = nullptr;        // MHz; type 1 = SM
  int (*get_power)(Device, unsigned*) = nullptr;             // mW
  Device dev = nullptr;
  bool ok = false;

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto handle = reinterpret_cast<int (*)(unsigned, Device*)>(
        dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    get_energy = reinterpret_cast<decltype(get_energy)>(
        dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    get_clock = reinterpret_cast<decltype(get_clock)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    get_power = reinterpret_cast<decltype(get_power)>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    ok = init && handle && get_energy && get_clock && get_power && init() == 0 &&
         handle(0, &dev) == 0;
  }
  double EnergyJ() const {
    unsigned long long mj = 0;
    return ok && get_energy(dev, &mj) == 0 ? mj * 1e-3 : NAN;
  }
  unsigned SmClock() const {
    unsigned mhz = 0;
    return ok && get_clock(dev, 1, &mhz) == 0 ? mhz : 0;
  }
  double PowerW() const {
    unsigned mw = 0;
    return ok && get_power(dev, &mw) == 0 ? mw * 1e-3 : NAN;
  }
};

// Normal(0, scale) values from a hash of (seed, index) and Box-Muller, on the
// device: the host's generator took most of a minute for the 400 M values
// of the FFN output's input.
__global__ void FillNormal(__half* p, size_t n, float scale, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9e3779b9u ^ seed ^ uint32_t(i >> 32) * 0x85ebca6bu;
    auto next = [&h] {
      h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
      return (h >> 8) * (1.0f / 16777216.0f);
    };
    const float u1 = fmaxf(next(), 1e-7f), u2 = next();
    p[i] = __float2half(scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}
void FillRandom(void* p, size_t n, float scale, std::mt19937& rng) {
  FillNormal<<<4096, 256>>>(static_cast<__half*>(p), n, scale, uint32_t(rng()));
  CK(cudaDeviceSynchronize());
}

struct Sample {
  double us, mj;
  unsigned mhz;
  double watts;
};

// Runs `enqueue` (one GEMM on `s`) as graphs of 20 for `seconds`: time and
// energy per GEMM, and the clock and power at the end.
Sample Sustained(ProbeContext& p, const Nvml& nvml, double seconds,
                 const std::function<void()>& enqueue) {
  constexpr int kPerGraph = 20;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(p.s, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < kPerGraph; ++r) enqueue();
  CK(cudaStreamEndCapture(p.s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  // A first graph unmeasured; then measure how long one takes, to size the run.
  CK(cudaGraphLaunch(ge, p.s));
  cudaEventRecord(p.e0, p.s);
  CK(cudaGraphLaunch(ge, p.s));
  cudaEventRecord(p.e1, p.s);
  CK(cudaEventSynchronize(p.e1));
  float one_ms = 0;
  cudaEventElapsedTime(&one_ms, p.e0, p.e1);
  const int graphs = std::max(1, int(seconds * 1000 / one_ms));
  const double e0 = nvml.EnergyJ();
  cudaEventRecord(p.e0, p.s);
  for (int i = 0; i < graphs; ++i) CK(cudaGraphLaunch(ge, p.s));
  cudaEventRecord(p.e1, p.s);
  // Sample clock and power near the end, while the GPU is still busy.
  const auto wait = std::chrono::milliseconds(int(std::max(0.0, graphs * double(one_ms) - 100)));
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until && cudaEventQuery(p.e1) == cudaErrorNotReady) {
  }
  Sample out{};
  out.mhz = nvml.SmClock();
  out.watts = nvml.PowerW();
  CK(cudaEventSynchronize(p.e1));
  const double e1 = nvml.EnergyJ();
  float ms = 0;
  cudaEventElapsedTime(&ms, p.e0, p.e1);
  const double gemms = double(graphs) * kPerGraph;
  out.us = ms * 1000 / gemms;
  std::fprintf(stderr, "  %d graphs of %d: %.0f ms\n", graphs, kPerGraph, ms);
  out.mj = (e1 - e0) * 1000 / gemms;
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return out;
}

// The median over rounds of one field of a way's samples.
template <class Field>
double Median(const std::vector<Sample>& samples, Field field) {
  std::vector<double> v;
  for (const Sample& s : samples) v.push_back(field(s));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void PrintRow(const char* model, const std::string& shape, const std::string& way,
              const std::vector<Sample>& samples, const std::string& err) {
  std::printf("| %s | %s | %s | %.2f | %.3f | %.0f | %.0f | %s |\n", model, shape.c_str(),
              way.c_str(), Median(samples, [](const Sample& s) { return s.us; }),
              Median(samples, [](const Sample& s) { return s.mj; }),
              Median(samples, [](const Sample& s) { return double(s.mhz); }),
              Median(samples, [](const Sample& s) { return s.watts; }), err.c_str());
}

// A CUTLASS kernel's Run as a way to time: enqueues it on `stream` with the
// arguments `a` (which must outlive the way), and stops the probe if it fails.
template <class Run>
std::function<void()> CutlassWay(Run run, const bertrt::cuda::BiasGeluGemmArgs& a,
                                 cudaStream_t stream) {
  return [run, &a, stream] {
    const bertrt::Status st = run(a, stream);
    if (!st.ok()) std::printf("%s\n", st.message().c_str()), std::exit(1);
  };
}

}  // namespace probe

using namespace probe;

int main(int argc, char** argv) {
  double seconds = 3;
  int rounds = 2, candidates = 6;
  bool only_large = false, others = true, ffn_in = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--candidates")) candidates = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only-large")) only_large = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--others")) others = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--ffn-in")) ffn_in = std::atoi(argv[i + 1]) != 0;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured
  ProbeContext p;
  Nvml nvml;
  if (!nvml.ok) std::printf("NVML not available: no energy, clock or power columns\n");
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::mt19937 rng(7);
  struct Case {
    const char* model;
    int rows, in, out;
  };
  const Case cases[] = {{"large b256 s384", 98304, 1024, 4096},
                        {"base b128 s128", 16384, 768, 3072}};
  std::printf("%.1f s per way and round, %d rounds, interleaved; medians over rounds\n\n",
              seconds, rounds);
  std::printf(
      "| model | rows, in -> out | way | us / GEMM | mJ / GEMM | SM MHz | W | max err |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const Case& c : cases) {
    if (!ffn_in || (only_large && c.rows != 98304)) continue;
    GemmShape bias{"ffn_in", c.out, c.rows, c.in, CUBLASLT_EPILOGUE_BIAS, false};
    GemmShape tanh_shape{"ffn_in", c.out, c.rows, c.in, CUBLASLT_EPILOGUE_GELU_BIAS, false};
    LtGemmCase lt(bias, 1), lt_tanh(tanh_shape, 1);
    FillRandom(lt.x, size_t(c.rows) * c.in, 1.0f, rng);
    FillRandom(lt.w[0], size_t(c.out) * c.in, 0.04f, rng);
    FillRandom(lt.bias, c.out, 0.1f, rng);
    CK(cudaMemcpy(lt_tanh.x, lt.x, size_t(c.rows) * c.in * 2, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(lt_tanh.w[0], lt.w[0], size_t(c.out) * c.in * 2, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(lt_tanh.bias, lt.bias, c.out * 2, cudaMemcpyDeviceToDevice));
    const auto algo = lt.Heuristic(p.lt, 1, p.kWorkspaceBytes).at(0).algo;
    const auto algo_tanh = lt_tanh.Heuristic(p.lt, 1, p.kWorkspaceBytes).at(0).algo;
    // The CUTLASS ways write lt_tanh.y (lt.y is cuBLASLt's); each is checked
    // right after its run.
    const bertrt::cuda::BiasGeluGemmArgs a{lt.x, c.rows, c.in, lt.w[0], lt.bias, c.out,
                                           lt_tanh.y, sms};
    auto cutlass = [&](auto run) { return CutlassWay(run, a, p.s); };
    struct Way {
      const char* name;
      std::function<void()> enqueue;
      bool check;
      std::vector<Sample> samples;
      float err = NAN;
    };
    std::vector<Way> ways = {
        {"lt tanh",
         [&] { CK(lt_tanh.Run(p.lt, algo_tanh, 0, p.ws, p.kWorkspaceBytes, p.s)); }, false, {}},
        {"lt, no act", [&] { CK(lt.Run(p.lt, algo, 0, p.ws, p.kWorkspaceBytes, p.s)); }, false,
         {}},
        {"cutlass, none", cutlass(EngineKernel<Identity>::Run), false, {}},
        {"cutlass, gelu", cutlass(EngineKernel<GeluErf>::Run), true, {}},
        {"cutlass, gelu degree 7 clamped", cutlass(EngineKernel<GeluClamped7>::Run), true, {}},
        {"cutlass, polynomial only (timing)", cutlass(EngineKernel<PolyOnly>::Run), false, {}},
        {"cutlass, ex2 only (timing)", cutlass(EngineKernel<Ex2Only>::Run), false, {}},
        {"cutlass, gelu, ping-pong 2x1",
         cutlass(EngineKernel<GeluErf, Shape<_128, _128, _64>, Shape<_2, _1, _1>>::Run), true, {}},
        {"cutlass, gelu, ping-pong 1x1",
         cutlass(EngineKernel<GeluErf, Shape<_128, _128, _64>, Shape<_1, _1, _1>>::Run), true, {}},
        {"cutlass, gelu, cooperative 256x128 1x2",
         cutlass(EngineKernel<GeluErf, Shape<_256, _128, _64>, Shape<_1, _2, _1>,
                              cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                              cutlass::epilogue::TmaWarpSpecializedCooperative>::Run),
         true, {}},
    };
    for (int r = 0; r < rounds; ++r)
      for (Way& w : ways) {
        w.samples.push_back(Sustained(p, nvml, seconds, w.enqueue));
        if (w.check && r == 0)
          w.err = CheckGeluGemm(lt.x, lt.w[0], lt.bias, lt_tanh.y, c.rows, c.in, c.out).first;
      }
    const std::string shape = std::to_string(c.rows) + ", " + std::to_string(c.in) + " -> " +
                              std::to_string(c.out);
    for (const Way& w : ways)
      PrintRow(c.model, shape, w.name, w.samples, w.check ? std::to_string(w.err) : "");
  }

  // The other GEMMs, in bertrt's column-major view (y[m, n] = W[k, m]^T
  // x[k, n]): cuBLASLt's first heuristic answer against CUTLASS's tilings
  // (--others), and each of the heuristic's first `--candidates` (BERT-large).
  const int rows = 98304, base_rows = 16384;
  const std::pair<const char*, GemmShape> others_shapes[] = {
      {"large b256 s384", {"qkv", 3072, rows, 1024, CUBLASLT_EPILOGUE_BIAS, false}},
      {"large b256 s384", {"attn_out", 1024, rows, 1024, CUBLASLT_EPILOGUE_BIAS, true}},
      {"large b256 s384", {"ffn_out", 1024, rows, 4096, CUBLASLT_EPILOGUE_BIAS, true}},
      {"base b128 s128", {"qkv", 2304, base_rows, 768, CUBLASLT_EPILOGUE_BIAS, false}},
      {"base b128 s128", {"attn_out", 768, base_rows, 768, CUBLASLT_EPILOGUE_BIAS, true}},
      {"base b128 s128", {"ffn_out", 768, base_rows, 3072, CUBLASLT_EPILOGUE_BIAS, true}}};
  for (const auto& [model, sh] : others_shapes) {
    const bool large = sh.n == rows;
    if (!large && (only_large || !others)) continue;
    if (candidates <= 0 && !others) break;
    LtGemmCase lt(sh, 1);
    FillRandom(lt.x, size_t(sh.n) * sh.k, 1.0f, rng);
    FillRandom(lt.w[0], size_t(sh.m) * sh.k, 0.04f, rng);
    FillRandom(lt.bias, sh.m, 0.1f, rng);
    FillRandom(lt.res, size_t(sh.m) * sh.n, 1.0f, rng);
    const std::string shape = std::string(sh.name) + " " + std::to_string(sh.n) + ", " +
                              std::to_string(sh.k) + " -> " + std::to_string(sh.m);
    const auto answers = lt.Heuristic(p.lt, std::max(candidates, 1), p.kWorkspaceBytes);
    if (others) {
      void* y = nullptr;  // CUTLASS's output (lt.y is cuBLASLt's)
      CK(cudaMalloc(&y, size_t(sh.m) * sh.n * 2));
      const bertrt::cuda::BiasGeluGemmArgs a{
          lt.x, sh.n, sh.k, lt.w[0], lt.bias, sh.m, y, sms, sh.residual ? lt.res : nullptr};
      auto cutlass = [&](auto run) { return CutlassWay(run, a, p.s); };
      struct Way {
        std::string name;
        std::function<void()> enqueue;
        const void* out;
        std::vector<Sample> samples;
        float err = NAN;
      };
      std::vector<Way> ways = {
          {"lt answer 0",
           [&] { CK(lt.Run(p.lt, answers.at(0).algo, 0, p.ws, p.kWorkspaceBytes, p.s)); },
           lt.y, {}},
          {"cutlass ping-pong 128x128 1x2",
           sh.residual ? cutlass(PingPong12<true>::Run) : cutlass(PingPong12<false>::Run), y, {}},
          {"cutlass ping-pong 128x128 2x1",
           sh.residual ? cutlass(PingPong21<true>::Run) : cutlass(PingPong21<false>::Run), y, {}},
          {"cutlass cooperative 256x128 1x2",
           sh.residual ? cutlass(Cooperative256<true>::Run) : cutlass(Cooperative256<false>::Run),
           y, {}},
      };
      for (int r = 0; r < rounds; ++r)
        for (Way& w : ways) {
          w.samples.push_back(Sustained(p, nvml, seconds, w.enqueue));
          if (r == 0)
            w.err = CheckGemm(lt.x, lt.w[0], lt.bias, sh.residual ? lt.res : nullptr, false,
                              w.out, sh.n, sh.k, sh.m)
                        .first;
        }
      for (const Way& w : ways)
        PrintRow(model, shape, w.name.c_str(), w.samples, std::to_string(w.err));
      cudaFree(y);
    }
    if (candidates <= 0 || !large) continue;
    std::vector<std::vector<Sample>> samples(answers.size());
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < answers.size(); ++i)
        samples[i].push_back(Sustained(p, nvml, seconds, [&] {
          CK(lt.Run(p.lt, answers[i].algo, 0, p.ws, p.kWorkspaceBytes, p.s));
        }));
    for (size_t i = 0; i < answers.size(); ++i) {
      int tile = 0, stages = 0, cluster = 0;
      size_t got = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&answers[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                           sizeof(tile), &got);
      cublasLtMatmulAlgoConfigGetAttribute(&answers[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                           &stages, sizeof(stages), &got);
      cublasLtMatmulAlgoConfigGetAttribute(&answers[i].algo,
                                           CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                           sizeof(cluster), &got);
      PrintRow(model, shape,
               "lt answer " + std::to_string(i) + " (tile " + std::to_string(tile) + ", stages " +
                   std::to_string(stages) + ", cluster " + std::to_string(cluster) + ")",
               samples[i], "");
    }
  }
  return 0;
}

// The runtime boundary: a ragged batch of token ids in, named outputs out. The
// engine never sees text, JSON or protobuf; the callers never see kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt {

// Sequences packed back to back, no padding. Sequence i owns tokens
// [cu_seqlens[i], cu_seqlens[i+1]).
struct RaggedBatch {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;
  std::vector<int32_t> cu_seqlens{0};
  // Per sequence: the first token a sentence embedding pools (>0 leaves out
  // a prompt's tokens: ModelConfig::include_prompt false); less than its length.
  std::vector<int32_t> pool_start;
  int max_len = 0;

  int num_seqs() const { return static_cast<int>(cu_seqlens.size()) - 1; }
  int num_tokens() const { return cu_seqlens.back(); }
  void Add(const std::vector<int32_t>& ids, const std::vector<int32_t>& type_ids,
           int32_t pool_start = 0);
};

// One output tensor. Per-sequence outputs are [num_seqs, width]; per-token
// outputs are ragged [num_tokens, width], split by the batch's cu_seqlens.
struct NamedOutput {
  std::string name;  // as DescribeOutputs (bertrt/head_outputs.h) names and lays it out
  bool per_token = false;
  int width = 0;
  std::vector<float> data;
};

struct RunOptions {
  // Also return last_hidden_state (per token, hidden_size wide).
  bool last_hidden_state = false;
  // false: a sentence-embedding model's vector as it is before the model's
  // Normalize module (TEI's `normalize: false`); no effect on other models.
  bool normalize = true;
};

struct BatchOutputs {
  std::vector<NamedOutput> outputs;
  const NamedOutput* Find(const std::string& name) const;
};

// GPU time of one kind of operation, summed over the batches an engine ran
// with profiling on (CudaEngineOptions::profile).
struct OpProfile {
  std::string name;  // "gemm ffn_in", "attention", "layernorm", ...
  long calls = 0;
  double seconds = 0;
  double flops = 0;  // GEMMs and attention; 0 for the rest
};

// How an 8-bit GEMM's input is scaled: per token (each row's own range,
// found as it is quantized: the default, the most accurate), or per tensor
// with a scale calibrated by the largest |x| seen, a percentile of |x|
// (values beyond it clip) or the bound with the least expected squared
// error (model/calibration.h).
enum class CalibrationMethod { kPerToken, kMax, kPercentile, kMse };

// What an 8-bit engine must keep of fp32's accuracy on held-out inputs (the
// defaults: embeddings' cosine mean 0.999 and min 0.99, their top-10
// retrieval overlap 0.95, 99.5% of argmaxes equal).
struct AccuracyBudget {
  double cosine_mean = 0.999, cosine_min = 0.99, top10_overlap = 0.95, argmax = 0.995;
};

// How far an 8-bit engine's outputs are from fp32's on held-out inputs.
struct OutputAccuracy {
  std::string output;
  int rows = 0;
  double cosine_mean = 1.0, cosine_min = 1.0;  // per row
  // The standard error of cosine_mean (the rows' standard deviation over
  // the square root of their number): how far the mean over other texts
  // like these may be from it.
  double cosine_mean_stderr = 0.0;
  double max_abs_error = 0.0;
  // Outputs whose row's largest value is the prediction: the share of rows
  // whose argmax agrees; -1: not such an output.
  double argmax_agreement = -1.0;
  // Sequence vectors (embeddings): the mean share of each held-out row's 10
  // nearest others (by cosine) that fp32 and 8 bits agree on; -1: not one.
  double top10_overlap = -1.0;
};

struct QuantizationReport {
  std::string precision;    // "int8"
  std::string calibration;  // the method ("per token, SmoothQuant 0.5")
  int calibration_sequences = 0, held_out_sequences = 0;
  int quantized_linears = 0;  // of `linears` in all
  int linears = 0;
  // Linears put back to fp32 to meet the budget, costliest first, with the
  // worst held-out score (cosine mean or argmax agreement) each alone in
  // 8 bits gave.
  std::vector<std::pair<std::string, double>> kept_fp32;
  // Linears the format cannot take, kept in fp32 from the start: an fp8
  // GEMM's input and output widths must be multiples of 16 (Fp8GemmTakes).
  std::vector<std::string> unsupported;
  std::vector<OutputAccuracy> outputs;
  AccuracyBudget budget;  // what `outputs` were held to
  bool within_budget = true;
  // One line per output, for a notice or `bertrt inspect`.
  std::string Summary() const;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual StatusOr<BatchOutputs> Run(const RaggedBatch& batch, const RunOptions& options) = 0;
  virtual const ModelConfig& config() const = 0;
  virtual std::string device() const = 0;
  // Highest memory the engine's own buffers reached (weights excluded).
  virtual size_t PeakMemoryBytes() const = 0;
  // Per-operation times, when the engine was created to profile; else empty.
  virtual std::vector<OpProfile> Profile() const { return {}; }
  // Blocks until the work an engine does off the request path (the CUDA
  // engine's graph captures) is done, so that the next Run of a shape seen
  // before takes the steady-state path: for benchmarks and tests.
  virtual void WaitForBackgroundWork() {}
  // What a batch runs as, for warm-up: batches with equal keys run the same
  // prepared program (the CUDA engine's padded shape and its graph), so
  // warming one warms them all. By default every batch's own dimensions.
  virtual std::string ShapeKey(const RaggedBatch& batch, const RunOptions& options) const;
  // How many prepared shapes the engine keeps (least recently used ones are
  // dropped past it); 0: no limit.
  virtual size_t KeptShapes() const { return 0; }
  // An 8-bit engine's calibration and accuracy against fp32; else none.
  virtual std::optional<QuantizationReport> Quantization() const { return std::nullopt; }
};

// Checks ids against the vocabulary, type ids (of a model that takes them)
// against type_vocab_size and each length against the positions the model
// has (max_positions), before any compute.
Status ValidateBatch(const RaggedBatch& batch, const ModelConfig& config);

// The 8-bit formats of the encoder's Linears' GEMMs. int8: symmetric
// integers, per output channel for the weights (the CPU's VNNI GEMMs). fp8:
// FP8 E4M3 (core/half.h) with one scale per weight tensor and one per input
// tensor, as Hopper's tensor cores take them through cuBLASLt; the CPU engine
// runs the same arithmetic emulated (each operand rounded to E4M3, fp32
// products: slower than fp32, the reference the GPU's FP8 GEMMs answer to).
enum class QuantFormat { kInt8, kFp8 };
const char* QuantFormatName(QuantFormat format);  // "int8" | "fp8"
// The largest magnitude a format's scaled values take: 127 or 448.
float QuantFormatMax(QuantFormat format);
// Whether FP8 GEMMs take a Linear of these widths: cuBLASLt's FP8 kernels
// want both of the weight's dimensions a multiple of 16 (a Linear that is not
// stays in the engine's precision, named in the report's `unsupported`).
inline bool Fp8GemmTakes(int in, int out) { return in % 16 == 0 && out % 16 == 0; }

// 8-bit GEMMs for the encoder's Linears (QKV, attention output, FFN in and
// out); embeddings, LayerNorm, attention, pooling and heads stay in their
// engine's precision.
struct QuantizeOptions {
  QuantFormat format = QuantFormat::kInt8;
  // Representative inputs: the encoder's Linear inputs over these set
  // SmoothQuant's per-column factors and (per tensor) the scales.
  std::vector<RaggedBatch> calibration;
  // Inputs the accuracy report compares int8 with fp32 on (none: no report
  // and no fallback).
  std::vector<RaggedBatch> held_out;
  // kPerToken is int8's alone (fp8's inputs take a scale per tensor).
  CalibrationMethod method = CalibrationMethod::kPerToken;
  double percentile = 99.99;  // kPercentile's
  // SmoothQuant's migration strength (0: none): each input column divided by
  // max|x|^alpha / max|w|^(1 - alpha), the weights' column multiplied by it.
  // int8's alone: fp8's exponent spans the outliers (0 for fp8).
  float smoothing_alpha = 0.5f;
  // Past the budget, the Linears whose 8 bits cost most accuracy go back to
  // fp32, one at a time, until it holds (the report lists them).
  AccuracyBudget budget;
};

struct CpuEngineOptions {
  int threads = 0;  // 0: all cores
  // Where the engine's notices go (nullptr: nowhere): it widens a plan's
  // fp16/bf16 weights to fp32 and says so.
  std::function<void(const std::string&)> on_notice;
  // Set: 8-bit GEMMs (int8, or fp8 emulated), calibrated at creation.
  std::optional<QuantizeOptions> quantize;
  // The encoder's Linears (QKV, attention output, FFN in and out) in bf16:
  // weights and each GEMM's input rounded to bf16, fp32 accumulation
  // (AVX512_BF16 or AMX; refused without); the rest fp32. Not with 8 bits.
  bool bf16 = false;
};

StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(std::shared_ptr<const Model> model,
                                                  const CpuEngineOptions& options);

}  // namespace bertrt

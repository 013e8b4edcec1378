// Outputs of an engine held to a reference engine's on sample texts: how a
// built plan is verified (`bertrt build`) and the self-check each GPU engine
// passes before `run` or `serve` uses it (EngineSelfCheck).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bertrt/engine.h"
#include "bertrt/head_outputs.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"

namespace bertrt {

// Verification of a built plan against the fp32 reference.
struct VerifySample {
  std::string text;
  std::optional<std::string> text_pair;
};

// English, Chinese, Japanese, Russian, Arabic, a pair and a long text.
std::vector<VerifySample> BuiltInVerifySamples();
// JSON Lines of {"text": ..., "text_pair": ...}.
StatusOr<std::vector<VerifySample>> ReadVerifySamples(const std::string& path);

struct VerifyReport {
  double max_abs_diff = 0;
  double mean_abs_diff = 0;
  double max_abs_reference = 0;  // scale for the relative fp32 threshold
  double min_cosine = 1;          // over every row
  // The same split by what the rows are: scores read by argmax and softmax
  // (logits, QA start/end) and vectors read by direction (embeddings).
  double min_cosine_vectors = 1;
  double min_cosine_scores = 1;
  double max_abs_diff_scores = 0;
  double max_abs_reference_scores = 0;
  int argmax_total = 0;  // rows compared (classification heads only)
  int argmax_equal = 0;
  int samples = 0;
  std::string output_name;  // the output compared (logits, embedding, ...)
};

// The samples encoded with `tokenizer` (up to max_length tokens each), as one batch.
StatusOr<RaggedBatch> EncodeSamples(const Tokenizer& tokenizer,
                                    const std::vector<VerifySample>& samples, int max_length);

// Compares the head's outputs (those of `outputs`, DescribeOutputs', that a
// run returns unasked) of two runs of `batch`. A row of an argmax output
// (logits, QA start/end) whose argmaxes differ counts as disagreeing unless
// the reference's two classes lie within 1% of the row's largest magnitude: a
// near tie, which any rounding may flip.
StatusOr<VerifyReport> CompareOutputs(const std::vector<OutputDescription>& outputs,
                                      const RaggedBatch& batch, const BatchOutputs& reference,
                                      const BatchOutputs& candidate);

// Encodes the samples, runs both engines on them as one batch and compares
// the head's outputs (`outputs`: the model's).
StatusOr<VerifyReport> CompareEngines(const std::vector<OutputDescription>& outputs,
                                      Engine& reference, Engine& candidate,
                                      const Tokenizer& tokenizer,
                                      const std::vector<VerifySample>& samples, int max_length);

// The thresholds: fp32 max abs diff <= 1e-4 * max(1, max |reference|);
// fp16/bf16: vectors (embeddings) min cosine >= 0.999; scores (logits) min
// cosine >= 0.999 or max abs diff <= 16 units of the precision's rounding
// (2^-11 fp16, 2^-8 bf16) times max(1, max |reference score|) -- a softmax
// moves by at most its inputs' largest change, and the cosine of a few
// near-zero logits says nothing; every argmax equal (near ties aside, see
// CompareOutputs). Ok or the reason.
Status CheckVerifyThresholds(const VerifyReport& report, Precision precision);

// "max abs diff 0.000812, mean 0.000131, min cosine 0.999998, argmax 7/7"
std::string DescribeReport(const VerifyReport& report);

// What an 8-bit model's check found (CheckQuantizedReproduced).
struct QuantizedCheck {
  VerifyReport reproduced;  // this engine against the engine that quantized the model
  // Where `reproduced` was beyond bf16's thresholds: this engine's and the
  // quantizing engine's answers against the fp32 model's.
  std::optional<VerifyReport> ours_vs_fp32, theirs_vs_fp32;
  // "the answers of the engine that quantized the model reproduced (max abs
  // diff ...)" or, for a GPU's 8-bit GEMMs, how both stand against fp32.
  std::string Describe() const;
};

// The check an engine made from an 8-bit model (an int8 or fp8 plan) passes
// at load: its answers on the model's check batch (QuantizedWeights) held to
// those of the engine that quantized it, at bf16's thresholds
// (CheckVerifyThresholds): a rounding apart, as another CPU's fp32 kernels
// give, where 8-bit kernels that saturate or round otherwise land far
// outside. Where that fails (a GPU rounds fp16 activations onto E4M3 or the
// int8 grid where the CPU rounded fp32 ones, so part of its roundings go the
// other way) and the model holds the fp32 answers (check_reference): this
// engine's answers must be about as close to them as the quantizing
// engine's were, within twice their error. FailedPrecondition with the
// numbers when not.
StatusOr<QuantizedCheck> CheckQuantizedReproduced(const Model& model, Engine& engine);

// The check a GPU engine passes before `bertrt run` or `serve` uses it
// (--skip-verify opts out): the built-in samples through the CPU engine in
// fp32, computed once at Create, and through each engine checked, held to
// CheckVerifyThresholds. A kernel that computes wrong numbers at the model's
// real size then stops the start instead of serving plausible answers.
class EngineSelfCheck {
 public:
  static StatusOr<EngineSelfCheck> Create(std::shared_ptr<const Model> model,
                                          const Tokenizer& tokenizer);
  // The report, or FailedPrecondition with the numbers when `engine`
  // (computing in `precision`) is beyond the thresholds.
  StatusOr<VerifyReport> Check(Engine& engine, Precision precision) const;

 private:
  std::vector<OutputDescription> outputs_;  // the model's
  RaggedBatch batch_;
  BatchOutputs reference_;
};

}  // namespace bertrt

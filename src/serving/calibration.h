// Calibration inputs for 8-bit engines: the user's representative texts (a
// file) or a small built-in multilingual corpus, tokenized as requests are
// and split into calibration batches and held-out ones for the accuracy
// report.
#pragma once

#include <string>
#include <vector>

#include "bertrt/engine.h"
#include "bertrt/model.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"

namespace bertrt::serving {

// One input: a text, or a pair (cross-encoders, QA).
struct CalibrationText {
  std::string text, text_pair;
};

// The built-in corpus (calibration_corpus.cc).
const std::vector<std::string>& BuiltInCalibrationTexts();

// How an 8-bit engine is calibrated: --calibration's method ("token", the
// default: per-token scales; per tensor "max", "mse" or "pNN", e.g.
// "p99.99") on `texts` (empty: the built-in corpus), at most `samples` of
// them (0: all).
struct CalibrationSpec {
  std::string method;
  std::vector<CalibrationText> texts;
  int samples = 0;
  AccuracyBudget budget;  // --accuracy-budget's
};

// The method a --calibration value names.
StatusOr<std::pair<CalibrationMethod, double>> ParseCalibrationMethod(const std::string& name);

// An accuracy budget from its --accuracy-budget text: comma-separated
// key=value pairs over the defaults (AccuracyBudget), the keys cosine_mean,
// cosine_min, top10 and argmax, each value in [0, 1] ("argmax=0.99").
StatusOr<AccuracyBudget> ParseAccuracyBudget(const std::string& text);

// The engine's 8-bit options for `format`: the texts tokenized (truncated to
// the model's limit), every fifth held out for the report (when there are
// ten or more), in batches of 16. fp8 calibrates with max unless told
// otherwise, per tensor, without SmoothQuant.
StatusOr<QuantizeOptions> MakeQuantizeOptions(QuantFormat format, const CalibrationSpec& spec,
                                              const Tokenizer& tokenizer,
                                              const ModelConfig& config);

}  // namespace bertrt::serving

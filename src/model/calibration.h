// Calibration of 8-bit GEMM inputs: the statistics of one Linear's input
// values over representative batches, and the clipping bound a method
// chooses from them (the input scale is that bound over the format's largest
// value: 127 for int8, 448 for fp8). Backend
// independent: a backend feeds it the values its forward computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bertrt/engine.h"

namespace bertrt::model {

// |x| of one tensor's values over the calibration batches: a first pass
// finds the largest, a second fills a histogram of [0, largest].
class InputStatistics {
 public:
  static constexpr int kBins = 2048;

  // `rows` rows of `cols` values: the largest |x|, overall and per column.
  void SeeMax(const float* x, size_t rows, int cols);
  // After every SeeMax: the histogram over [0, max()] of |x| times
  // `multipliers` (per column; empty: 1): what a GEMM that smooths its
  // input (SmoothQuant) quantizes. Call SetSmoothing first for that.
  void SeeHistogram(const float* x, size_t rows, int cols);
  float max() const { return max_; }
  const std::vector<float>& column_max() const { return column_max_; }
  // Divides each column by `divisors` from now on (the histogram's range
  // becomes the largest smoothed |x|).
  void SetSmoothing(std::vector<float> divisors);

  // The clipping bound a per-tensor `method` picks for `format` (> 0; the
  // largest |x| for kMax, or where the histogram is empty).
  float Bound(CalibrationMethod method, double percentile, QuantFormat format) const;

 private:
  float max_ = 0.0f;
  std::vector<float> column_max_;
  std::vector<float> multipliers_;  // 1 / the smoothing divisors; empty: none
  uint64_t count_ = 0;
  std::vector<uint64_t> bins_;
};

// The method's name as the report spells it ("per token", "max",
// "percentile 99.99", "mse").
std::string CalibrationName(CalibrationMethod method, double percentile);

}  // namespace bertrt::model

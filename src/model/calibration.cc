#include "model/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace bertrt::model {

void InputStatistics::SeeMax(const float* x, size_t rows, int cols) {
  if (column_max_.size() != size_t(cols)) column_max_.assign(cols, 0.0f);
  for (size_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      column_max_[c] = std::max(column_max_[c], std::abs(x[r * cols + c]));
  for (float m : column_max_) max_ = std::max(max_, m);
}

void InputStatistics::SetSmoothing(std::vector<float> divisors) {
  multipliers_.assign(divisors.size(), 1.0f);
  max_ = 0.0f;
  for (size_t c = 0; c < divisors.size(); ++c) {
    multipliers_[c] = 1.0f / divisors[c];
    if (c < column_max_.size()) max_ = std::max(max_, column_max_[c] * multipliers_[c]);
  }
}

void InputStatistics::SeeHistogram(const float* x, size_t rows, int cols) {
  if (bins_.empty()) bins_.assign(kBins, 0);
  if (max_ <= 0.0f) return;
  const float per_bin = kBins / max_;
  const bool smooth = multipliers_.size() == size_t(cols);
  for (size_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float v = std::abs(x[r * cols + c]) * (smooth ? multipliers_[c] : 1.0f);
      ++bins_[std::min(kBins - 1, static_cast<int>(v * per_bin))];
    }
  count_ += rows * cols;
}

namespace {

// The spacing of a format's values around `x` (in its own units, |x| <= its
// max): int8's are 1 apart; E4M3's 2^-9 apart below 2^-6, else 1/8 of x's
// power of two.
double GridStep(QuantFormat format, double x) {
  if (format == QuantFormat::kInt8) return 1.0;
  if (x < 0x1p-6) return 0x1p-9;
  return std::ldexp(1.0, std::ilogb(x) - 3);
}

}  // namespace

float InputStatistics::Bound(CalibrationMethod method, double percentile,
                             QuantFormat format) const {
  if (max_ <= 0.0f) return 1.0f;  // an input that was always zero: any scale serves
  if (method == CalibrationMethod::kMax || method == CalibrationMethod::kPerToken || count_ == 0)
    return max_;
  const double width = max_ / kBins;
  if (method == CalibrationMethod::kPercentile) {
    const double wanted = count_ * std::clamp(percentile, 0.0, 100.0) / 100.0;
    uint64_t seen = 0;
    for (int b = 0; b < kBins; ++b) {
      seen += bins_[b];
      if (seen >= wanted) return static_cast<float>((b + 1) * width);
    }
    return max_;
  }
  // kMse: the bound whose expected squared error is least: values below it
  // rounded to the format's grid scaled to it (uniform error over the step
  // there, variance step^2 / 12), those above clipped to it. Candidates are
  // the bins' upper edges.
  const double top = QuantFormatMax(format);
  double best = max_, best_error = -1.0;
  for (int c = 1; c <= kBins; ++c) {
    const double bound = c * width, scale = bound / top;
    double error = 0.0;
    for (int b = 0; b < kBins; ++b) {
      if (!bins_[b]) continue;
      const double v = (b + 0.5) * width;
      if (v <= bound) {
        const double step = scale * GridStep(format, v / scale);
        error += bins_[b] * step * step / 12.0;
      } else {
        error += bins_[b] * (v - bound) * (v - bound);
      }
    }
    if (best_error < 0.0 || error < best_error) best_error = error, best = bound;
  }
  return static_cast<float>(best);
}

std::string CalibrationName(CalibrationMethod method, double percentile) {
  switch (method) {
    case CalibrationMethod::kPerToken:
      return "per token";
    case CalibrationMethod::kMax:
      return "max";
    case CalibrationMethod::kMse:
      return "mse";
    case CalibrationMethod::kPercentile: {
      char text[48];
      std::snprintf(text, sizeof(text), "percentile %g", percentile);
      return text;
    }
  }
  return "?";
}

}  // namespace bertrt::model

#include "serving/calibration.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace bertrt::serving {

StatusOr<std::pair<CalibrationMethod, double>> ParseCalibrationMethod(const std::string& name) {
  if (name.empty() || name == "token") return std::make_pair(CalibrationMethod::kPerToken, 0.0);
  if (name == "max") return std::make_pair(CalibrationMethod::kMax, 0.0);
  if (name == "mse") return std::make_pair(CalibrationMethod::kMse, 0.0);
  if (name.size() > 1 && name[0] == 'p') {
    char* end = nullptr;
    const double p = std::strtod(name.c_str() + 1, &end);
    if (end && *end == '\0' && p > 50.0 && p <= 100.0)
      return std::make_pair(CalibrationMethod::kPercentile, p);
  }
  return InvalidArgument("--calibration " + name +
                         ": expected token, max, mse or pNN (a percentile of |x| above 50, e.g. "
                         "p99.99)");
}

StatusOr<Int8Options> MakeInt8Options(const CalibrationSpec& spec, const Tokenizer& tokenizer,
                                      const ModelConfig& config) {
  Int8Options options;
  ASSIGN_OR_RETURN(auto method, ParseCalibrationMethod(spec.method));
  options.method = method.first;
  options.percentile = method.second;
  std::vector<CalibrationText> texts = spec.texts;
  if (texts.empty())
    for (const std::string& t : BuiltInCalibrationTexts()) texts.push_back({t, ""});
  if (spec.samples > 0 && texts.size() > size_t(spec.samples)) texts.resize(spec.samples);
  if (texts.empty()) return InvalidArgument("int8 calibration: no texts");
  EncodeLimits limits;
  limits.max_length = static_cast<size_t>(config.max_seq_length);
  constexpr int kBatch = 16;
  const bool hold_out = texts.size() >= 10;
  RaggedBatch calibration, held_out;
  // Moves a full batch (or, forced, any non-empty one) to `to`.
  auto flush = [](RaggedBatch* b, std::vector<RaggedBatch>* to, bool force) {
    if (b->num_seqs() >= kBatch || (force && b->num_seqs() > 0)) {
      to->push_back(std::move(*b));
      *b = RaggedBatch{};
    }
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& pair = texts[i].text_pair;
    auto enc = tokenizer.Encode(
        texts[i].text, pair.empty() ? std::nullopt : std::optional<std::string_view>(pair), limits);
    if (!enc.ok())
      return Status(enc.status().code(), "int8 calibration text " + std::to_string(i + 1) + ": " +
                                             enc.status().message());
    const bool held = hold_out && i % 5 == 4;
    (held ? held_out : calibration).Add(enc->input_ids, enc->token_type_ids);
    flush(held ? &held_out : &calibration, held ? &options.held_out : &options.calibration, false);
  }
  flush(&calibration, &options.calibration, true);
  flush(&held_out, &options.held_out, true);
  return options;
}

}  // namespace bertrt::serving

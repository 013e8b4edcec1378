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

StatusOr<AccuracyBudget> ParseAccuracyBudget(const std::string& text) {
  AccuracyBudget budget;
  const std::pair<const char*, double*> keys[] = {{"cosine_mean", &budget.cosine_mean},
                                                  {"cosine_min", &budget.cosine_min},
                                                  {"top10", &budget.top10_overlap},
                                                  {"argmax", &budget.argmax}};
  const std::string usage =
      "--accuracy-budget " + text +
      ": expected key=value pairs separated by commas, keys cosine_mean, cosine_min, top10 and "
      "argmax, values in [0, 1] (e.g. cosine_mean=0.998,argmax=0.99)";
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgument(usage);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    double* field = nullptr;
    for (const auto& [name, target] : keys)
      if (key == name) field = target;
    char* parsed_end = nullptr;
    const double v = std::strtod(value.c_str(), &parsed_end);
    if (!field || value.empty() || *parsed_end != '\0' || !(v >= 0.0 && v <= 1.0))
      return InvalidArgument(usage);
    *field = v;
  }
  return budget;
}

StatusOr<QuantizeOptions> MakeQuantizeOptions(QuantFormat format, const CalibrationSpec& spec,
                                              const Tokenizer& tokenizer,
                                              const ModelConfig& config) {
  const std::string name = QuantFormatName(format);
  QuantizeOptions options;
  options.format = format;
  const bool fp8 = format == QuantFormat::kFp8;
  ASSIGN_OR_RETURN(auto method,
                   ParseCalibrationMethod(fp8 && spec.method.empty() ? "max" : spec.method));
  if (fp8 && method.first == CalibrationMethod::kPerToken)
    return InvalidArgument(
        "--calibration token is int8's: fp8 gives each GEMM input one calibrated scale (max, "
        "the default, mse or pNN)");
  options.method = method.first;
  options.percentile = method.second;
  if (fp8) options.smoothing_alpha = 0.0f;
  options.budget = spec.budget;
  std::vector<CalibrationText> texts = spec.texts;
  if (texts.empty())
    for (const std::string& t : BuiltInCalibrationTexts()) texts.push_back({t, ""});
  if (spec.samples > 0 && texts.size() > size_t(spec.samples)) texts.resize(spec.samples);
  if (texts.empty()) return InvalidArgument(name + " calibration: no texts");
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
      return Status(enc.status().code(), name + " calibration text " + std::to_string(i + 1) +
                                             ": " + enc.status().message());
    const bool held = hold_out && i % 5 == 4;
    (held ? held_out : calibration).Add(enc->input_ids, enc->token_type_ids);
    flush(held ? &held_out : &calibration, held ? &options.held_out : &options.calibration, false);
  }
  flush(&calibration, &options.calibration, true);
  flush(&held_out, &options.held_out, true);
  return options;
}

}  // namespace bertrt::serving

// Which tensor sections a plan holds for a config, and the metadata JSON:
// the one place the writer and the reader agree on names, shapes and dtypes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertrt/quantized_weights.h"
#include "bertrt/model.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"
#include "model/weight_schema.h"

namespace bertrt::plan {

// A tensor section of a plan: the model's weight schema's stored tensors
// (model/weight_schema.h).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  // GEMM weights, GEMM biases and embedding tables are stored in the plan's
  // precision (what the CUDA engine computes in); LayerNorm parameters and
  // the classifier stay fp32, as the CUDA engine keeps them.
  bool in_compute_precision = false;
  // Its ModelWeights tensors, in order: one, or Q, K and V, stored packed
  // ([3h, h] and [3h], the layout both engines build at creation); the reader
  // hands out the parts as views.
  std::vector<model::TensorRef> parts;
  // The weight of an encoder Linear (QKV, attention output, FFN in and out):
  // what an 8-bit plan may store in 8 bits.
  bool encoder_linear_weight = false;
};

// `untied_decoder`: a masked-LM head's decoder weight is its own, not the
// word embeddings (ModelWeights::mlm_decoder), which are stored once.
std::vector<TensorSpec> ExpectedTensors(const ModelConfig& config, bool has_pooler,
                                        bool untied_decoder);

DType StoredDType(Precision precision, bool in_compute_precision);

// An 8-bit plan (metadata precision "int8" or "fp8", built from a model with
// Model::quantized): its other tensors as an fp32 plan's; each 8-bit Linear's
// weight section holds its I8 (int8) or F8_E4M3 (fp8) weights, followed by
// its scales and smoothing sections; the check's batch and outputs come
// last. The metadata's object under the precision's name says the rest.
inline constexpr const char* kInt8Precision = "int8";
inline constexpr const char* kFp8Precision = "fp8";
// The 8-bit format a plan's precision names; none: not an 8-bit plan.
std::optional<QuantFormat> QuantizedPlanFormat(const std::string& precision);
std::string ScalesSection(const std::string& weight);     // "<weight>.scales"
std::string SmoothingSection(const std::string& weight);  // "<weight>.smoothing"
// "<int8|fp8>_check.<what>": input_ids, token_type_ids, cu_seqlens,
// pool_start (I32), then each output's rows (F32) under
// "<int8|fp8>_check.out.<name>".
std::string CheckSection(QuantFormat format, const std::string& what);
// The metadata's "int8" or "fp8" object: each Linear's input scale, the
// report, the check's sizes and outputs.
nlohmann::json QuantizedToJson(const QuantizedWeights& quantized);
// Untrusted JSON: the Linears (each one of `specs`' encoder Linear weights)
// with their input scales (> 0 for fp8), the report, the check's outputs
// (names and widths) and its sizes; the tensors and the check's arrays are
// left for the reader to bind.
StatusOr<QuantizedWeights> QuantizedFromJson(const nlohmann::json& j, QuantFormat format,
                                             const std::vector<TensorSpec>& specs,
                                             int* check_sequences, int* check_tokens);
// The accuracy report as the metadata stores it (and `inspect --json` shows it).
nlohmann::json ReportToJson(const QuantizationReport& report);
StatusOr<QuantizationReport> ReportFromJson(const nlohmann::json& j);

nlohmann::json ConfigToJson(const ModelConfig& config);
// The Dense modules as plans (and `bertrt inspect`) write them:
// [{in_features, out_features, bias, activation}, ...].
nlohmann::json DenseToJson(const std::vector<DenseSpec>& dense);
// Untrusted JSON: every field's presence, type and range is checked.
StatusOr<ModelConfig> ConfigFromJson(const nlohmann::json& j);

nlohmann::json SettingsToJson(const TokenizerSettings& s);
StatusOr<TokenizerSettings> SettingsFromJson(const nlohmann::json& j);

}  // namespace bertrt::plan

// Which tensor sections a plan holds for a config, and the metadata JSON:
// the one place the writer and the reader agree on names, shapes and dtypes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
};

// `untied_decoder`: a masked-LM head's decoder weight is its own, not the
// word embeddings (ModelWeights::mlm_decoder), which are stored once.
std::vector<TensorSpec> ExpectedTensors(const ModelConfig& config, bool has_pooler,
                                        bool untied_decoder);

DType StoredDType(Precision precision, bool in_compute_precision);

nlohmann::json ConfigToJson(const ModelConfig& config);
// The Dense modules as plans (and `bertrt inspect`) write them:
// [{in_features, out_features, bias, activation}, ...].
nlohmann::json DenseToJson(const std::vector<DenseSpec>& dense);
// Untrusted JSON: every field's presence, type and range is checked.
StatusOr<ModelConfig> ConfigFromJson(const nlohmann::json& j);

nlohmann::json SettingsToJson(const TokenizerSettings& s);
StatusOr<TokenizerSettings> SettingsFromJson(const nlohmann::json& j);

}  // namespace bertrt::plan

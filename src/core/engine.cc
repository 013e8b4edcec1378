#include "bertrt/engine.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace bertrt {

void RaggedBatch::Add(const std::vector<int32_t>& ids, const std::vector<int32_t>& type_ids,
                      int32_t start) {
  pool_start.push_back(start);
  input_ids.insert(input_ids.end(), ids.begin(), ids.end());
  token_type_ids.insert(token_type_ids.end(), type_ids.begin(), type_ids.end());
  cu_seqlens.push_back(cu_seqlens.back() + static_cast<int32_t>(ids.size()));
  max_len = std::max(max_len, static_cast<int>(ids.size()));
}

const NamedOutput* BatchOutputs::Find(const std::string& name) const {
  for (const NamedOutput& o : outputs)
    if (o.name == name) return &o;
  return nullptr;
}

std::string Engine::ShapeKey(const RaggedBatch& batch, const RunOptions& options) const {
  std::string key = options.last_hidden_state ? "hidden:" : "";
  if (!options.normalize) key += "unnormalized:";
  for (int s = 0; s < batch.num_seqs(); ++s)
    key += std::to_string(batch.cu_seqlens[s + 1] - batch.cu_seqlens[s]) + ",";
  return key;
}

Status ValidateBatch(const RaggedBatch& batch, const ModelConfig& config) {
  if (batch.cu_seqlens.empty() || batch.cu_seqlens.front() != 0)
    return InvalidArgument("batch: cu_seqlens must start with 0");
  if (batch.input_ids.size() != static_cast<size_t>(batch.cu_seqlens.back()) ||
      batch.token_type_ids.size() != batch.input_ids.size())
    return InvalidArgument("batch: input_ids (" + std::to_string(batch.input_ids.size()) +
                           "), token_type_ids (" + std::to_string(batch.token_type_ids.size()) +
                           ") and cu_seqlens (total " + std::to_string(batch.cu_seqlens.back()) +
                           ") disagree");
  if (batch.pool_start.size() != static_cast<size_t>(batch.num_seqs()))
    return InvalidArgument("batch: pool_start has " + std::to_string(batch.pool_start.size()) +
                           " entries for " + std::to_string(batch.num_seqs()) + " sequences");
  int max_len = 0;
  for (int s = 0; s < batch.num_seqs(); ++s) {
    int len = batch.cu_seqlens[s + 1] - batch.cu_seqlens[s];
    if (len <= 0)
      return InvalidArgument("batch: sequence " + std::to_string(s) +
                             " is empty; every sequence needs at least one token");
    if (batch.pool_start[s] != 0 && config.include_prompt)
      return InvalidArgument("batch: sequence " + std::to_string(s) + " pools from token " +
                             std::to_string(batch.pool_start[s]) +
                             ", but this model pools every token (include_prompt)");
    if (batch.pool_start[s] < 0 || batch.pool_start[s] >= len)
      return InvalidArgument("batch: sequence " + std::to_string(s) + " pools from token " +
                             std::to_string(batch.pool_start[s]) + " of its " +
                             std::to_string(len) + "; a prompt left out of the pooling must "
                             "leave a token of the text");
    if (len > config.max_positions())
      return InvalidArgument("batch: sequence " + std::to_string(s) + " has " +
                             std::to_string(len) + " tokens, more than the model's " +
                             std::to_string(config.max_positions()) +
                             " position embeddings; truncate it (--max-length)");
    max_len = std::max(max_len, len);
  }
  if (max_len != batch.max_len)
    return InvalidArgument("batch: max_len is " + std::to_string(batch.max_len) +
                           " but the longest sequence has " + std::to_string(max_len));
  for (size_t i = 0; i < batch.input_ids.size(); ++i) {
    int32_t id = batch.input_ids[i];
    if (id < 0 || id >= config.vocab_size)
      return InvalidArgument("batch: token id " + std::to_string(id) + " at position " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(config.vocab_size) + ")");
    // A model that takes no token types reads type 0 whatever they say.
    int32_t t = batch.token_type_ids[i];
    if (config.takes_token_types && (t < 0 || t >= config.type_vocab_size))
      return InvalidArgument("batch: token type id " + std::to_string(t) + " at position " +
                             std::to_string(i) + " is outside [0, " +
                             std::to_string(config.type_vocab_size) + ")");
  }
  return Status::Ok();
}

}  // namespace bertrt

namespace bertrt {

const char* QuantFormatName(QuantFormat format) {
  return format == QuantFormat::kFp8 ? "fp8" : "int8";
}

float QuantFormatMax(QuantFormat format) { return format == QuantFormat::kFp8 ? 448.0f : 127.0f; }

std::string QuantizationReport::Summary() const {
  std::string s = precision + " GEMMs in " + std::to_string(quantized_linears) + " of " +
                  std::to_string(linears) + " Linears, calibrated (" + calibration + ") on " +
                  std::to_string(calibration_sequences) + " sequences";
  char line[256];
  for (size_t i = 0; i < unsupported.size(); ++i)
    s += (i == 0 ? "\n  kept in fp32, their widths not multiples of 16 as " + precision +
                       " GEMMs need: "
                 : ", ") +
         unsupported[i];
  if (held_out_sequences == 0) return s + "; no held-out inputs to report accuracy on";
  for (const auto& [name, score] : kept_fp32) {
    std::snprintf(line, sizeof(line), "\n  kept in fp32 to meet the accuracy budget: %s (alone in %s: %.5f)",
                  name.c_str(), precision.c_str(), score);
    s += line;
  }
  s += "\n  against fp32 on " + std::to_string(held_out_sequences) + " held-out sequences" +
       (within_budget ? " (within the budget):" : " (OUTSIDE the budget):");
  for (const OutputAccuracy& a : outputs) {
    std::snprintf(line, sizeof(line),
                  "\n  %s: cosine mean %.5f (standard error %.5f) min %.5f, max |diff| %.3g",
                  a.output.c_str(), a.cosine_mean, a.cosine_mean_stderr, a.cosine_min,
                  a.max_abs_error);
    s += line;
    if (a.argmax_agreement >= 0) {
      // Rows say the resolution: over 100 rows one disagreement is 1%.
      std::snprintf(line, sizeof(line), ", argmax agreement %.2f%% of %d rows",
                    100 * a.argmax_agreement, a.rows);
      s += line;
    }
    if (a.top10_overlap >= 0) {
      std::snprintf(line, sizeof(line), ", top-10 overlap %.3f", a.top10_overlap);
      s += line;
    }
  }
  return s;
}

}  // namespace bertrt

#include "runtime/outputs.h"

#include <utility>

namespace bertrt {

NamedOutput MakeOutput(std::string name, bool per_token, int width, const float* data,
                       size_t rows) {
  NamedOutput o;
  o.name = std::move(name);
  o.per_token = per_token;
  o.width = width;
  o.data.assign(data, data + rows * static_cast<size_t>(width));
  return o;
}

void AppendQuestionAnsweringOutputs(const float* logits, size_t tokens, BatchOutputs* out) {
  NamedOutput start{"start_logits", true, 1, std::vector<float>(tokens)};
  NamedOutput end{"end_logits", true, 1, std::vector<float>(tokens)};
  for (size_t t = 0; t < tokens; ++t) {
    start.data[t] = logits[2 * t];
    end.data[t] = logits[2 * t + 1];
  }
  out->outputs.push_back(std::move(start));
  out->outputs.push_back(std::move(end));
}

bool OutputsReadOnlyFirstTokens(const ModelConfig& config, bool has_pooler,
                                bool last_hidden_state) {
  if (last_hidden_state) return false;
  switch (config.head) {
    case HeadKind::kBase:
    case HeadKind::kSequenceClassification:
      return has_pooler;
    case HeadKind::kSentenceEmbedding:
      // Without the prompt, cls pooling takes the first token after it.
      return config.include_prompt && config.pooling_modes == std::vector<Pooling>{Pooling::kCls};
    case HeadKind::kTokenClassification:
    case HeadKind::kQuestionAnswering:
      return false;
  }
  return false;
}

}  // namespace bertrt

// Output assembly shared by the backends: the names, shapes and ragged layout
// of what each head returns, from host arrays the backend computed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bertrt/engine.h"
#include "bertrt/model.h"

namespace bertrt {

// Copies rows x width floats into a new output.
NamedOutput MakeOutput(std::string name, bool per_token, int width, const float* data,
                       size_t rows);

// Splits qa_outputs logits [tokens, 2] into start_logits and end_logits,
// per token, width 1.
void AppendQuestionAnsweringOutputs(const float* logits, size_t tokens, BatchOutputs* out);

// A classifier's scores from its logits, as TEI and transformers' pipelines
// give them: a softmax over several labels, a sigmoid of a single logit (a
// cross-encoder's relevance).
std::vector<float> ClassScores(const float* logits, int n);

// Whether the outputs read only each sequence's first token of the last
// layer: a pooler (sequence classification, the base model's pooler_output)
// or CLS pooling, and no hidden states asked for. The backends then run the
// last layer after its attention on those rows alone.
bool OutputsReadOnlyFirstTokens(const ModelConfig& config, bool has_pooler,
                                bool last_hidden_state);

}  // namespace bertrt

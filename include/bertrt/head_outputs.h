// What a model returns, described in one place: each output's name, layout,
// the array of the head it is read from and what it means, from the model's
// config. The engines assemble their outputs by it; the server's metadata and
// config checks, the TEI routes, `bertrt run` and plan verification name,
// shape and interpret theirs by it, so that a head's outputs are spelled once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bertrt/model.h"

namespace bertrt {

// The last layer's per-token states: every model has them, returned only
// when asked for (RunOptions::last_hidden_state).
inline constexpr char kLastHiddenState[] = "last_hidden_state";

// The arrays a head computes, which its outputs are read from.
enum class HeadArray {
  kPooler,             // pooler dense + tanh of each sequence's first token: [seqs, hidden]
  kClassifier,         // classifier logits of the pooled rows or of every token: [rows, labels]
  kSentenceEmbedding,  // pooled, through the Dense modules, normalized: [seqs, dense width]
  kHiddenState,        // the last layer: [tokens, hidden]
  kSparseEmbedding,    // SPLADE's pooled vocabulary weights: [seqs, vocab]
};
inline constexpr int kHeadArrayCount = 5;

struct OutputDescription {
  std::string name;
  bool per_token = false;  // ragged [tokens, width], else [seqs, width]
  int width = 0;
  // Its values: columns [first_column, first_column + width) of each row of
  // `array`, whose rows are array_width wide. Question answering's start and
  // end logits are the two columns of one [tokens, 2] array; truncate_dim
  // keeps an embedding's first columns.
  HeadArray array = HeadArray::kHiddenState;
  int array_width = 0;
  int first_column = 0;
  // Returned only when asked for (last_hidden_state).
  bool on_request = false;
  // Computed from each sequence's first token of the last layer alone (a
  // pooler, CLS pooling): the engines then run the last layer after its
  // attention on those rows only.
  bool first_tokens_only = false;
  // Each row's largest value is the prediction (a class; a span's start or
  // end), which plan verification holds the engines to.
  bool argmax = false;
  // Its values score the model's labels, which ModelConfig::LabelName names.
  bool scores_labels = false;
  // The vector that stands for a sequence: what embedding routes return.
  bool sequence_vector = false;
  // Mostly zeros, one value per vocabulary entry (SPLADE): /embed_sparse
  // returns its non-zero entries.
  bool sparse = false;
};

// The model's outputs in the order the engines return them: the head's,
// then last_hidden_state (on request). `has_pooler`: the checkpoint has the
// pooler's weights (a BertModel saved without them has no pooler_output).
std::vector<OutputDescription> DescribeOutputs(const ModelConfig& config, bool has_pooler);
std::vector<OutputDescription> DescribeOutputs(const Model& model);

// Whether a run returns `output`: on-request outputs only when asked for.
inline bool Returned(const OutputDescription& output, bool last_hidden_state) {
  return !output.on_request || last_hidden_state;
}

// The output named `name`, or nullptr.
const OutputDescription* FindOutput(const std::vector<OutputDescription>& outputs,
                                    std::string_view name);

// Whether what a run returns reads only each sequence's first token of the
// last layer (and something is returned), so that the backends may run the
// last layer after its attention on those rows alone.
bool OutputsReadOnlyFirstTokens(const std::vector<OutputDescription>& outputs,
                                bool last_hidden_state);

}  // namespace bertrt

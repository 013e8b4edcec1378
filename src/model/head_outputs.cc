#include "bertrt/head_outputs.h"

#include <algorithm>

namespace bertrt {
namespace {

// Question answering's classifier gives each token a start and an end logit.
constexpr int kSpanLogits = 2;

// The head's outputs, last_hidden_state aside.
std::vector<OutputDescription> HeadOutputs(const ModelConfig& c, bool has_pooler) {
  const int h = c.hidden_size;
  switch (c.head) {
    case HeadKind::kBase:
      if (!has_pooler) return {};
      return {{.name = "pooler_output",
               .per_token = false,
               .width = h,
               .array = HeadArray::kPooler,
               .array_width = h,
               .first_tokens_only = true,
               .sequence_vector = true}};
    case HeadKind::kSequenceClassification:
      return {{.name = "logits",
               .per_token = false,
               .width = c.num_labels,
               .array = HeadArray::kClassifier,
               .array_width = c.num_labels,
               // The classifier reads the pooler's rows: the first tokens, or the mean.
               .first_tokens_only = !c.classifier_mean_pooling,
               .argmax = true,
               .scores_labels = true}};
    case HeadKind::kTokenClassification:
      return {{.name = "logits",
               .per_token = true,
               .width = c.num_labels,
               .array = HeadArray::kClassifier,
               .array_width = c.num_labels,
               .argmax = true,
               .scores_labels = true}};
    case HeadKind::kQuestionAnswering: {
      auto span_end = [](const char* name, int column) {
        return OutputDescription{.name = name,
                                 .per_token = true,
                                 .width = 1,
                                 .array = HeadArray::kClassifier,
                                 .array_width = kSpanLogits,
                                 .first_column = column,
                                 .argmax = true};
      };
      return {span_end("start_logits", 0), span_end("end_logits", 1)};
    }
    case HeadKind::kSentenceEmbedding:
      return {{.name = "embedding",
               .per_token = false,
               .width = c.embedding_width(),
               .array = HeadArray::kSentenceEmbedding,
               .array_width = c.dense_output_width(),
               // Without the prompt, cls pooling takes the first token after it.
               .first_tokens_only =
                   c.include_prompt && c.pooling_modes == std::vector<Pooling>{Pooling::kCls},
               .sequence_vector = true}};
    case HeadKind::kSparseEmbedding:
      return {{.name = "sparse_embedding",
               .per_token = false,
               .width = c.vocab_size,
               .array = HeadArray::kSparseEmbedding,
               .array_width = c.vocab_size,
               .sequence_vector = true,
               .sparse = true}};
  }
  return {};
}

}  // namespace

std::vector<OutputDescription> DescribeOutputs(const ModelConfig& config, bool has_pooler) {
  std::vector<OutputDescription> outputs = HeadOutputs(config, has_pooler);
  outputs.push_back({.name = kLastHiddenState,
                     .per_token = true,
                     .width = config.hidden_size,
                     .array = HeadArray::kHiddenState,
                     .array_width = config.hidden_size,
                     .on_request = true});
  return outputs;
}

std::vector<OutputDescription> DescribeOutputs(const Model& model) {
  return DescribeOutputs(model.config, !model.weights.pooler_w.empty());
}

const OutputDescription* FindOutput(const std::vector<OutputDescription>& outputs,
                                    std::string_view name) {
  for (const OutputDescription& o : outputs)
    if (o.name == name) return &o;
  return nullptr;
}

bool OutputsReadOnlyFirstTokens(const std::vector<OutputDescription>& outputs,
                                bool last_hidden_state) {
  bool any = false;
  for (const OutputDescription& o : outputs) {
    if (!Returned(o, last_hidden_state)) continue;
    if (!o.first_tokens_only) return false;
    any = true;
  }
  return any;
}

}  // namespace bertrt

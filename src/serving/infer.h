// One request's work on a served model, whichever front end took it (TEI
// and OpenAI routes, KServe over HTTP and gRPC, `bertrt run`): each
// operation checks that the model answers it, encodes the inputs, runs them
// through the batcher (timed and counted by the request's RequestTimer) and
// turns the run's outputs into what was asked: pooled, sparse or per-token
// embeddings, label scores, a ranking, entities, answers, tokens. Front ends
// only translate their wire format to these calls and back. Knows no HTTP,
// JSON or protobuf. (The shape of text-embeddings-inference's core::Infer.)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "serving/embeddings.h"
#include "serving/question_answering.h"
#include "serving/served_model.h"
#include "serving/token_classification.h"

namespace bertrt::serving {

// What a model is to the routes that pick by it (TEI's model type): a
// classifier scores labels per sequence, a re-ranker one label.
enum class ModelKind { kEmbedding, kClassifier, kReranker };
ModelKind KindOf(const ServedModel& model);
// The per-sequence output that scores the model's labels, or nullptr.
const OutputDescription* LabelScores(const ServedModel& model);
// A classifier's or re-ranker's labels (0 for an embedding model).
int NumLabels(const ServedModel& model);

// One input given as text, or as token ids (and type ids, or none) taken as they are.
struct ModelInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids, type_ids;
};

struct LabelScore {
  int label = 0;  // ModelConfig::LabelName names it
  float score = 0;
};

// How a classifier's logits become its label scores (the HF pipelines'
// function_to_apply): softmax over several labels and a sigmoid of one
// (kDefault, TEI's and the pipelines' choice), either of them, or the logits.
enum class ScoreFunction { kDefault, kSoftmax, kSigmoid, kNone };

struct PredictOptions {
  ScoreFunction function = ScoreFunction::kDefault;
  size_t top_k = 0;  // the best this many labels of each input; 0: every label
};

struct RankedText {
  size_t index = 0;  // of the texts given
  float score = 0;
};

struct SparseEntry {
  int32_t index = 0;  // a vocabulary id
  float value = 0;
};

// One input's hidden states: `tokens` rows of `width` values.
struct TokenVectors {
  int tokens = 0, width = 0;
  std::vector<float> values;
};

// A token of a text as the model runs it: special ones (added by the
// template) have no place in the text; the others' start and stop are byte
// offsets into it.
struct Token {
  int32_t id = 0;
  bool special = false;
  std::string text;
  size_t start = 0, stop = 0;
};

// A token classification or question answering request on one input
// (prepared, i.e. tokenized into windows), and what it answers.
using Task = std::variant<TokenClassification, QuestionAnswering>;
using TaskAnswer = std::variant<std::vector<Entity>, std::vector<Answer>>;
// Token classification of `text`, or the answer to `question` in `context`,
// on `model`, tokenized into at most `max_windows` windows (0: no limit;
// more: ResourceExhausted). InvalidArgument says which option or text is wrong.
StatusOr<Task> PrepareTokenClassification(const ServedModel& model, std::string text,
                                          TokenClassificationOptions options, size_t max_windows);
StatusOr<Task> PrepareQuestionAnswering(const ServedModel& model, std::string_view question,
                                        std::string context, QuestionAnsweringOptions options,
                                        size_t max_windows);
// The windows a task runs.
size_t WindowCount(const Task& task);

class Infer {
 public:
  // `timer` times and counts the runs (and Finish is the caller's, once its
  // answer is written); `is_cancelled` says whether the client went away.
  Infer(ServedModel& model, RequestTimer& timer, std::function<bool()> is_cancelled = {});

  ServedModel& model() const { return model_; }
  // Tokens the runs so far computed (OpenAI's and Infinity's usage).
  int tokens() const { return tokens_; }

  // Each input's tokens. Errors are Encode's, prefixed "input I: " when
  // there are several inputs (token ids' always).
  StatusOr<std::vector<SequenceInput>> Encode(std::vector<ModelInput> inputs,
                                              const EncodeOptions& options) const;
  StatusOr<std::vector<SequenceInput>> Encode(const std::vector<TextInput>& inputs,
                                              const EncodeOptions& options) const;
  // Runs `sequences` in one batcher request (with last_hidden_state when
  // asked): the raw outputs KServe and `bertrt run` answer with.
  StatusOr<InferResult> Run(std::vector<SequenceInput> sequences, RunOptions options = {});

  // Pooled embeddings (TEI's embed_pooled, OpenAI's embeddings): first what
  // the options ask of this model (FailedPrecondition: not an embedding
  // model or one that cannot give it; InvalidArgument: the dimensions),
  // then one row per input.
  StatusOr<EmbeddingRequest> PrepareEmbed(EmbeddingOptions options) const;
  StatusOr<std::vector<std::vector<float>>> Embed(const EmbeddingRequest& request,
                                                  std::vector<ModelInput> inputs,
                                                  const EncodeOptions& options);
  // The cosine similarity of each sentence to `source`.
  StatusOr<std::vector<float>> Similarity(std::string source, std::vector<std::string> sentences,
                                          const EncodeOptions& options);
  // Each input's last hidden states (an embedding model's).
  StatusOr<std::vector<TokenVectors>> EmbedAll(std::vector<ModelInput> inputs,
                                               const EncodeOptions& options);
  // A SPLADE model's vectors: each input's non-zero entries in id order.
  StatusOr<std::vector<std::vector<SparseEntry>>> EmbedSparse(std::vector<ModelInput> inputs,
                                                              const EncodeOptions& options);
  // A classifier's (or re-ranker's) label scores per input, best first, as
  // `predict` asks (the function, how many).
  StatusOr<std::vector<std::vector<LabelScore>>> Predict(const std::vector<TextInput>& inputs,
                                                         const EncodeOptions& options,
                                                         const PredictOptions& predict);
  // A re-ranker's scores of (query, text) pairs, best first.
  StatusOr<std::vector<RankedText>> Rerank(const std::string& query,
                                           const std::vector<std::string>& texts,
                                           const EncodeOptions& options, bool raw);
  // Entities or answers for prepared tasks, in their order, their windows
  // run in one batcher request.
  StatusOr<std::vector<TaskAnswer>> RunTasks(const std::vector<const Task*>& tasks);

  // The tokens of what the model would run for each text (its prompt
  // first): InvalidArgument for a text longer than the model takes,
  // OutOfRange for one too long to normalize (a payload too large).
  StatusOr<std::vector<std::vector<Token>>> Tokenize(const std::vector<std::string>& texts,
                                                     const std::optional<std::string>& prompt_name,
                                                     bool add_special) const;
  // Token ids back to text; InvalidArgument for an id outside the vocabulary.
  StatusOr<std::vector<std::string>> Decode(const std::vector<std::vector<int32_t>>& ids,
                                            bool skip_special) const;

 private:
  // The model's output `name` in `result`; Internal when the engine gave none.
  static StatusOr<const NamedOutput*> Output(const InferResult& result, const std::string& name);

  ServedModel& model_;
  RequestTimer& timer_;
  std::function<bool()> is_cancelled_;
  int tokens_ = 0;
};

}  // namespace bertrt::serving

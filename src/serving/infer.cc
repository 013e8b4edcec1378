#include "serving/infer.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "model/outputs.h"

namespace bertrt::serving {

const OutputDescription* LabelScores(const ServedModel& model) {
  for (const OutputDescription& o : model.outputs())
    if (o.scores_labels && !o.per_token) return &o;
  return nullptr;
}

int NumLabels(const ServedModel& model) {
  const OutputDescription* scores = LabelScores(model);
  return scores ? scores->width : 0;
}

ModelKind KindOf(const ServedModel& model) {
  const OutputDescription* scores = LabelScores(model);
  if (!scores) return ModelKind::kEmbedding;
  return scores->width == 1 ? ModelKind::kReranker : ModelKind::kClassifier;
}

namespace {

// The model's first output with `flag` set (sequence_vector, sparse), or nullptr.
const OutputDescription* FirstOutput(const ServedModel& m, bool OutputDescription::*flag) {
  for (const OutputDescription& o : m.outputs())
    if (o.*flag) return &o;
  return nullptr;
}

Status NotEmbedding(const ServedModel& m) {
  const ModelKind kind = KindOf(m);
  if (kind == ModelKind::kEmbedding) return Status::Ok();
  return FailedPrecondition("Model is not an embedding model: this " +
                            std::string(kind == ModelKind::kReranker ? "re-ranker" : "classifier") +
                            " answers /predict" +
                            (kind == ModelKind::kReranker ? " and /rerank" : ""));
}

Status WithIndex(const Status& s, size_t index) {
  return Status(s.code(), "input " + std::to_string(index) + ": " + s.message());
}

// Code-point offsets (what the tokenizer gives) to byte offsets, past the end
// clamped to it. Tokens come in text order, so a walk on from the last offset
// asked reads a long text once and holds no table.
class BytePositions {
 public:
  explicit BytePositions(std::string_view s) : s_(s) {}
  size_t operator()(uint32_t chars) {
    auto continuation = [&](size_t i) {
      return (static_cast<unsigned char>(s_[i]) & 0xC0) == 0x80;
    };
    for (; chars_ > chars; --chars_) {
      do {
        --byte_;
      } while (continuation(byte_));
    }
    for (; chars_ < chars && byte_ < s_.size(); ++chars_) {
      do {
        ++byte_;
      } while (byte_ < s_.size() && continuation(byte_));
    }
    return byte_;
  }

 private:
  std::string_view s_;
  uint32_t chars_ = 0;
  size_t byte_ = 0;
};

}  // namespace

Infer::Infer(ServedModel& model, RequestTimer& timer, std::function<bool()> is_cancelled)
    : model_(model), timer_(timer), is_cancelled_(std::move(is_cancelled)) {}

StatusOr<const NamedOutput*> Infer::Output(const InferResult& result, const std::string& name) {
  const NamedOutput* out = result.outputs.Find(name);
  if (!out) return Internal("the engine gave no " + name);
  return out;
}

StatusOr<std::vector<SequenceInput>> Infer::Encode(std::vector<ModelInput> inputs,
                                                   const EncodeOptions& options) const {
  std::vector<SequenceInput> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto seq =
        inputs[i].text
            ? model_.Encode(TextInput{std::move(*inputs[i].text), std::nullopt}, options)
            : model_.EncodeIds({std::move(inputs[i].ids), std::move(inputs[i].type_ids)}, options);
    if (!seq.ok())
      return inputs.size() > 1 || !inputs[i].text ? WithIndex(seq.status(), i) : seq.status();
    out.push_back(std::move(*seq));
  }
  return out;
}

StatusOr<std::vector<SequenceInput>> Infer::Encode(const std::vector<TextInput>& inputs,
                                                   const EncodeOptions& options) const {
  std::vector<SequenceInput> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto seq = model_.Encode(inputs[i], options);
    if (!seq.ok()) return inputs.size() > 1 ? WithIndex(seq.status(), i) : seq.status();
    out.push_back(std::move(*seq));
  }
  return out;
}

StatusOr<InferResult> Infer::Run(std::vector<SequenceInput> sequences, RunOptions options) {
  InferRequest request;
  request.is_cancelled = is_cancelled_;
  request.sequences = std::move(sequences);
  request.run = options;
  auto result = timer_.Infer(std::move(request));
  if (result.ok() && !result->cu_seqlens.empty()) tokens_ += result->cu_seqlens.back();
  return result;
}

StatusOr<EmbeddingRequest> Infer::PrepareEmbed(EmbeddingOptions options) const {
  RETURN_IF_ERROR(NotEmbedding(model_));
  const OutputDescription* spec = FirstOutput(model_, &OutputDescription::sequence_vector);
  if (!spec)
    return FailedPrecondition("Model is not an embedding model: this " +
                              std::string(HeadKindName(model_.config().head)) +
                              " model has no pooled output (a sentence-transformers or BertModel "
                              "directory has)");
  return EmbeddingRequest::Make(model_.config(), *spec, options);
}

StatusOr<std::vector<std::vector<float>>> Infer::Embed(const EmbeddingRequest& request,
                                                       std::vector<ModelInput> inputs,
                                                       const EncodeOptions& options) {
  ASSIGN_OR_RETURN(auto seqs, Encode(std::move(inputs), options));
  ASSIGN_OR_RETURN(InferResult r, Run(std::move(seqs), request.run_options()));
  return request.Rows(r);
}

StatusOr<std::vector<float>> Infer::Similarity(std::string source,
                                               std::vector<std::string> sentences,
                                               const EncodeOptions& options) {
  // Cosine similarity does not depend on the vectors' lengths: the model's
  // own vectors, normalized.
  ASSIGN_OR_RETURN(EmbeddingRequest request, PrepareEmbed({/*normalize=*/true, std::nullopt}));
  std::vector<ModelInput> inputs{{std::move(source), {}, {}}};
  for (std::string& s : sentences) inputs.push_back({std::move(s), {}, {}});
  ASSIGN_OR_RETURN(auto rows, Embed(request, std::move(inputs), options));
  std::vector<float> out;
  for (size_t i = 1; i < rows.size(); ++i) {
    double dot = 0;
    for (size_t k = 0; k < rows[0].size(); ++k) dot += double(rows[0][k]) * rows[i][k];
    out.push_back(static_cast<float>(dot));
  }
  return out;
}

StatusOr<std::vector<TokenVectors>> Infer::EmbedAll(std::vector<ModelInput> inputs,
                                                    const EncodeOptions& options) {
  RETURN_IF_ERROR(NotEmbedding(model_));
  ASSIGN_OR_RETURN(auto seqs, Encode(std::move(inputs), options));
  ASSIGN_OR_RETURN(InferResult r, Run(std::move(seqs), {.last_hidden_state = true}));
  ASSIGN_OR_RETURN(const NamedOutput* h, Output(r, kLastHiddenState));
  std::vector<TokenVectors> out;
  for (size_t i = 0; i + 1 < r.cu_seqlens.size(); ++i) {
    const size_t begin = static_cast<size_t>(r.cu_seqlens[i]) * h->width;
    const size_t end = static_cast<size_t>(r.cu_seqlens[i + 1]) * h->width;
    out.push_back({r.cu_seqlens[i + 1] - r.cu_seqlens[i], h->width,
                   std::vector<float>(h->data.begin() + begin, h->data.begin() + end)});
  }
  return out;
}

StatusOr<std::vector<std::vector<SparseEntry>>> Infer::EmbedSparse(std::vector<ModelInput> inputs,
                                                                   const EncodeOptions& options) {
  const OutputDescription* spec = FirstOutput(model_, &OutputDescription::sparse);
  if (!spec)
    return FailedPrecondition(
        "Model is not an embedding model with SPLADE pooling: this " +
        std::string(HeadKindName(model_.config().head)) +
        " model has no sparse output (a ...ForMaskedLM directory or a sentence-transformers "
        "SparseEncoder has); use /embed or /predict");
  ASSIGN_OR_RETURN(auto seqs, Encode(std::move(inputs), options));
  ASSIGN_OR_RETURN(InferResult r, Run(std::move(seqs)));
  ASSIGN_OR_RETURN(const NamedOutput* out, Output(r, spec->name));
  std::vector<std::vector<SparseEntry>> vectors;
  for (size_t i = 0; i + 1 < r.cu_seqlens.size(); ++i) {
    const float* row = out->data.data() + i * out->width;
    std::vector<SparseEntry> entries;
    for (int v = 0; v < out->width; ++v)
      if (row[v] != 0.0f) entries.push_back({v, row[v]});
    vectors.push_back(std::move(entries));
  }
  return vectors;
}

namespace {

// One input's label scores from its logits.
std::vector<float> LabelScoresOf(const float* logits, int n, ScoreFunction f) {
  // ClassScores: a softmax over several labels, a sigmoid of one.
  if (f == ScoreFunction::kDefault || (f == ScoreFunction::kSoftmax && n > 1))
    return ClassScores(logits, n);
  if (f == ScoreFunction::kSoftmax) return {1.0f};
  std::vector<float> p(logits, logits + n);
  if (f == ScoreFunction::kSigmoid)
    for (float& v : p) v = Sigmoid(v);
  return p;
}

}  // namespace

StatusOr<std::vector<std::vector<LabelScore>>> Infer::Predict(const std::vector<TextInput>& inputs,
                                                              const EncodeOptions& options,
                                                              const PredictOptions& predict) {
  if (KindOf(model_) == ModelKind::kEmbedding)
    return FailedPrecondition(
        "Model is not a classifier model: this embedding model answers /embed");
  ASSIGN_OR_RETURN(auto seqs, Encode(inputs, options));
  ASSIGN_OR_RETURN(InferResult r, Run(std::move(seqs)));
  ASSIGN_OR_RETURN(const NamedOutput* logits, Output(r, LabelScores(model_)->name));
  std::vector<std::vector<LabelScore>> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float* row = logits->data.data() + i * logits->width;
    const std::vector<float> scores = LabelScoresOf(row, logits->width, predict.function);
    if (std::any_of(scores.begin(), scores.end(), [](float s) { return std::isnan(s); }))
      return Internal("score is NaN");
    std::vector<LabelScore> ranked;
    for (size_t k = 0; k < scores.size(); ++k) ranked.push_back({static_cast<int>(k), scores[k]});
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const LabelScore& a, const LabelScore& b) { return a.score > b.score; });
    if (predict.top_k > 0 && ranked.size() > predict.top_k) ranked.resize(predict.top_k);
    all.push_back(std::move(ranked));
  }
  return all;
}

StatusOr<std::vector<RankedText>> Infer::Rerank(const std::string& query,
                                                const std::vector<std::string>& texts,
                                                const EncodeOptions& options, bool raw) {
  const ModelKind kind = KindOf(model_);
  if (kind != ModelKind::kReranker)
    return FailedPrecondition(
        "model is not a re-ranker model: /rerank needs a sequence-classification model with one "
        "label (a cross-encoder); this one " +
        (kind == ModelKind::kClassifier
             ? "has " + std::to_string(NumLabels(model_)) + " labels: use /predict with pairs"
             : std::string("is an embedding model: use /embed or /similarity")));
  std::vector<TextInput> pairs;
  pairs.reserve(texts.size());
  for (const std::string& t : texts) pairs.push_back({query, t});
  ASSIGN_OR_RETURN(auto seqs, Encode(pairs, options));
  ASSIGN_OR_RETURN(InferResult r, Run(std::move(seqs)));
  ASSIGN_OR_RETURN(const NamedOutput* logits, Output(r, LabelScores(model_)->name));
  if (logits->width != 1) return Internal("the engine gave no single logit");
  std::vector<RankedText> ranked;
  for (size_t i = 0; i < texts.size(); ++i) {
    const float score = raw ? logits->data[i] : ClassScores(logits->data.data() + i, 1)[0];
    if (std::isnan(score)) return Internal("score is NaN");
    ranked.push_back({i, score});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const RankedText& a, const RankedText& b) { return a.score > b.score; });
  return ranked;
}

namespace {
const std::vector<Encoding>& Windows(const Task& task) {
  return std::visit([](const auto& t) -> const std::vector<Encoding>& { return t.windows(); },
                    task);
}
}  // namespace

size_t WindowCount(const Task& task) { return Windows(task).size(); }

StatusOr<Task> PrepareTokenClassification(const ServedModel& model, std::string text,
                                          TokenClassificationOptions options, size_t max_windows) {
  ASSIGN_OR_RETURN(
      auto prepared,
      TokenClassification::Prepare(model.tokenizer(), std::move(text), model.max_input_length(),
                                   model.max_normalized_chars(), max_windows, std::move(options)));
  return Task(std::move(prepared));
}

StatusOr<Task> PrepareQuestionAnswering(const ServedModel& model, std::string_view question,
                                        std::string context, QuestionAnsweringOptions options,
                                        size_t max_windows) {
  ASSIGN_OR_RETURN(auto prepared,
                   QuestionAnswering::Prepare(model.tokenizer(), question, std::move(context),
                                              model.max_input_length(),
                                              model.max_normalized_chars(), max_windows, options));
  return Task(std::move(prepared));
}

StatusOr<std::vector<TaskAnswer>> Infer::RunTasks(const std::vector<const Task*>& tasks) {
  std::vector<SequenceInput> sequences;
  for (const Task* task : tasks)
    for (const Encoding& e : Windows(*task))
      sequences.push_back({e.input_ids, e.token_type_ids, 0});
  if (sequences.empty()) return std::vector<TaskAnswer>{};
  ASSIGN_OR_RETURN(InferResult result, Run(std::move(sequences)));
  // Where each window's per-token rows of an output start.
  auto rows = [&](const NamedOutput& o, int seq) {
    return o.data.data() + static_cast<size_t>(result.cu_seqlens[seq]) * o.width;
  };
  const ModelConfig& config = model_.config();
  std::vector<TaskAnswer> answers;
  int seq = 0;
  for (const Task* task : tasks) {
    if (const auto* ner = std::get_if<TokenClassification>(task)) {
      ASSIGN_OR_RETURN(const NamedOutput* out, Output(result, "logits"));
      std::vector<const float*> logits;
      for (size_t w = 0; w < ner->windows().size(); ++w) logits.push_back(rows(*out, seq++));
      answers.emplace_back(
          ner->Entities(logits, config.num_labels, [&](int i) { return config.LabelName(i); }));
      continue;
    }
    const auto& qa = std::get<QuestionAnswering>(*task);
    ASSIGN_OR_RETURN(const NamedOutput* start_logits, Output(result, "start_logits"));
    ASSIGN_OR_RETURN(const NamedOutput* end_logits, Output(result, "end_logits"));
    std::vector<const float*> start, end;
    for (size_t w = 0; w < qa.windows().size(); ++w, ++seq) {
      start.push_back(rows(*start_logits, seq));
      end.push_back(rows(*end_logits, seq));
    }
    answers.emplace_back(qa.Answers(start, end));
  }
  return answers;
}

StatusOr<std::vector<std::vector<Token>>> Infer::Tokenize(
    const std::vector<std::string>& texts, const std::optional<std::string>& prompt_name,
    bool add_special) const {
  // The tokens of what the model runs, the prompt (named or default) first.
  ASSIGN_OR_RETURN(std::string prompt, model_.config().PromptText(prompt_name));
  // Tokenizing stops once a text passes max_input_length.
  EncodeLimits limits;
  limits.max_length = static_cast<size_t>(model_.max_input_length());
  limits.truncate = false;
  limits.max_normalized_chars = model_.max_normalized_chars();
  const Tokenizer& tokenizer = model_.tokenizer();
  std::vector<std::vector<Token>> all;
  for (const std::string& input : texts) {
    const std::string prompted = prompt.empty() ? std::string() : prompt + input;
    const std::string_view text = prompt.empty() ? std::string_view(input) : prompted;
    EncodeReport report;
    auto enc = tokenizer.Encode(text, std::nullopt, limits, &report);
    if (report.too_long) {
      const std::string count = report.exact ? std::to_string(report.tokens) + " tokens, " : "";
      return InvalidArgument("input " + std::to_string(all.size()) + " is " + count +
                             "more than the model's max_input_length " +
                             std::to_string(model_.max_input_length()) +
                             "; /tokenize answers for what the model takes");
    }
    if (!enc.ok()) return enc.status();
    BytePositions at(text);
    std::vector<Token> tokens;
    for (size_t i = 0; i < enc->input_ids.size(); ++i) {
      const int32_t id = enc->input_ids[i];
      if (enc->special_tokens_mask[i]) {
        // Added by the template ([CLS], [SEP]): the token, no offsets.
        if (add_special) tokens.push_back({id, true, tokenizer.IdToToken(id), 0, 0});
        continue;
      }
      const auto [b, e] = enc->offsets[i];
      const size_t start = at(b), stop = at(e);
      tokens.push_back({id, false, std::string(text.substr(start, stop - start)), start, stop});
    }
    all.push_back(std::move(tokens));
  }
  return all;
}

StatusOr<std::vector<std::string>> Infer::Decode(const std::vector<std::vector<int32_t>>& ids,
                                                 bool skip_special) const {
  const Tokenizer& tokenizer = model_.tokenizer();
  const int64_t vocab = static_cast<int64_t>(tokenizer.vocab_size());
  std::vector<std::string> out;
  for (const auto& list : ids) {
    for (int32_t id : list)
      if (id < 0 || id >= vocab)
        return InvalidArgument("token id " + std::to_string(id) +
                               " is not in the vocabulary (ids go from 0 to " +
                               std::to_string(vocab - 1) + ")");
    out.push_back(tokenizer.Decode(list, skip_special));
  }
  return out;
}

}  // namespace bertrt::serving

// text-embeddings-inference's HTTP API on the registry's default model, to
// TEI's OpenAPI document (tests/data/tei_openapi.json): /embed, /embed_all,
// /embed_sparse, /predict, /rerank, /similarity, /tokenize, /decode, /info,
// /health, POST / and /invocations (by model type), and OpenAI's
// /v1/embeddings. Errors are TEI's {"error", "error_type"} with its status
// codes; /v1/embeddings answers OpenAI's {"error": {"message", "type",
// "param", "code"}} (with TEI's own fields beside it).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <thread>
#include <variant>

#include "core/json_float.h"
#include "server/common/task_request.h"
#include "server/http/http_server.h"
#include "server/http/texts_body.h"
#include "serving/infer.h"

namespace bertrt::server {
using serving::EncodeOptions;
using serving::KindOf;
using serving::ModelKind;
using serving::NumLabels;
using serving::RequestTimer;
using serving::ServedModel;
using serving::TextInput;
using nlohmann::json;

namespace {

// TEI's ErrorType, and the status TEI answers each with.
enum class ErrorType { kUnhealthy, kBackend, kOverloaded, kValidation, kTokenizer, kEmpty };

const char* ErrorTypeName(ErrorType t) {
  switch (t) {
    case ErrorType::kUnhealthy:
      return "Unhealthy";
    case ErrorType::kBackend:
      return "Backend";
    case ErrorType::kOverloaded:
      return "Overloaded";
    case ErrorType::kValidation:
      return "Validation";
    case ErrorType::kTokenizer:
      return "Tokenizer";
    case ErrorType::kEmpty:
      return "Empty";
  }
  return "Backend";
}

struct ApiError {
  int status = 500;
  ErrorType type = ErrorType::kBackend;
  std::string message;
  std::string param;  // the request field at fault (OpenAI's "param"), "" when none
};

ApiError Validation(std::string message, std::string param = "") {
  return {422, ErrorType::kValidation, std::move(message), std::move(param)};
}
ApiError Empty(std::string message, std::string param) {
  return {400, ErrorType::kEmpty, std::move(message), std::move(param)};
}
// A route the model's type does not serve (TEI: 424, "backend").
ApiError WrongModel(std::string message) {
  return {424, ErrorType::kBackend, std::move(message), ""};
}

// What bertrt's Status codes mean on the TEI routes.
ApiError FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:  // an input longer than the model takes (TEI: validation)
      return Validation(s.message());
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented:
      return WrongModel(s.message());
    case StatusCode::kNotFound:
      return {404, ErrorType::kValidation, s.message(), ""};
    case StatusCode::kResourceExhausted:
      return {429, ErrorType::kOverloaded, s.message(), ""};
    case StatusCode::kUnavailable:
      return {503, ErrorType::kUnhealthy, s.message(), ""};
    case StatusCode::kDeadlineExceeded:
      return {504, ErrorType::kBackend, s.message(), ""};
    default:
      return {500, ErrorType::kBackend, s.message(), ""};
  }
}

// A value or an ApiError; a Status converts (FromStatus), so that
// ASSIGN_OR_RETURN works on StatusOr and Result expressions alike.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                 // NOLINT: implicit by design
  Result(ApiError error) : v_(std::move(error)) {}          // NOLINT
  Result(const Status& status) : v_(FromStatus(status)) {}  // NOLINT
  Result(StatusOr<T> s)                                     // NOLINT
      : v_(s.ok() ? std::variant<T, ApiError>(std::move(s).value())
                  : std::variant<T, ApiError>(FromStatus(s.status()))) {}
  bool ok() const { return std::holds_alternative<T>(v_); }
  const ApiError& status() const { return std::get<ApiError>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, ApiError> v_;
};

#define RETURN_IF_API_ERROR(expr)                                        \
  do {                                                                   \
    if (std::optional<ApiError> _api_error = (expr)) return *_api_error; \
  } while (0)

json TeiErrorBody(const ApiError& e) {
  return json{{"error", e.message}, {"error_type", ErrorTypeName(e.type)}};
}

// OpenAI's error object (what the openai client reads), with TEI's own
// OpenAICompatErrorResponse fields beside it.
json OpenAiErrorBody(const ApiError& e) {
  std::string code = ErrorTypeName(e.type);
  std::transform(code.begin(), code.end(), code.begin(), ::tolower);
  const char* type = e.status >= 500   ? "server_error"
                     : e.status == 429 ? "rate_limit_error"
                                       : "invalid_request_error";
  return json{{"error",
               {{"message", e.message},
                {"type", type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", code}}},
              {"message", e.message},
              {"code", e.status},
              {"type", ErrorTypeName(e.type)},
              {"error_type", ErrorTypeName(e.type)}};
}

// An answer written as JSON text by its handler: the routes whose answers
// are mostly floats (embeddings) write them straight, without a tree.
struct JsonText {
  std::string text;
};

// What a handler answers: a JSON tree, or its text.
using Answer = std::variant<json, JsonText>;

template <typename T>
Result<Answer> AsAnswer(Result<T> r) {
  if (!r.ok()) return r.status();
  return Answer(std::move(r).value());
}

// What a handler gets: the server, the parsed body, the request and the
// serving core's operations on the model (serving::Infer).
struct Call {
  HttpServer& server;
  const json& body;
  const HttpRequest& req;
  serving::Infer& infer;
  // The body's texts when ReadTextsBody read them (`body` then holds its
  // other fields); nullptr when the full parse did.
  TextsBody* texts = nullptr;
  ServedModel& model() const { return infer.model(); }
};

// --- Request fields ------------------------------------------------------------

std::optional<ApiError> CheckBatch(ServedModel& m, size_t n, const char* field) {
  const int limit = m.scheduler().options().client_batch_limit();
  if (n <= static_cast<size_t>(limit)) return std::nullopt;
  // TEI's OpenAPI document: 413 with error_type validation.
  return ApiError{413, ErrorType::kValidation,
                  "batch size " + std::to_string(n) + " > maximum allowed batch size " +
                      std::to_string(limit) + " (max_client_batch_size in /info; the server's " +
                      "--max-client-batch-size): split \"" + field + "\" over several requests",
                  field};
}

// A boolean field: absent or null gives `fallback`.
Result<bool> Bool(const json& body, const char* name, bool fallback) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    return Validation(std::string("\"") + name + "\" must be true or false", name);
  return it->get<bool>();
}

// truncate, truncation_direction and prompt_name, as every embedding and
// classification route takes them (`from`: the body, or /similarity's parameters).
Result<EncodeOptions> ReadEncodeOptions(const json& from) {
  EncodeOptions o;
  ASSIGN_OR_RETURN(o.truncate, Bool(from, "truncate", false));
  auto dir = from.find("truncation_direction");
  if (dir != from.end() && !dir->is_null()) {
    const std::string d = dir->is_string() ? dir->get<std::string>() : dir->dump();
    if (d != "Left" && d != "left" && d != "Right" && d != "right")
      return Validation("\"truncation_direction\" must be \"Left\" or \"Right\", not " + d,
                        "truncation_direction");
    o.truncate_left = d == "Left" || d == "left";
  }
  auto prompt = from.find("prompt_name");
  if (prompt != from.end() && !prompt->is_null()) {
    if (!prompt->is_string()) return Validation("\"prompt_name\" must be a string", "prompt_name");
    o.prompt_name = prompt->get<std::string>();
  }
  return o;
}

// One input of /embed, /embed_all and /v1/embeddings: a text or token ids.
using Item = serving::ModelInput;

// TEI's Input: str | [int] | [str | [int], ...]. `batch` says whether it was a list of inputs.
Result<std::vector<Item>> ReadInputs(const json& body, const char* field, bool* batch) {
  auto it = body.find(field);
  if (it == body.end())
    return Validation(
        std::string("missing \"") + field + "\" (a string, token ids, or a list of them)", field);
  const json& v = *it;
  auto ids = [&](const json& list, size_t index) -> Result<Item> {
    Item item;
    for (const json& e : list) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
        return Validation(std::string("\"") + field + "\"" +
                              (*batch ? " item " + std::to_string(index) : std::string()) +
                              ": token ids must be non-negative integers",
                          field);
      item.ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    return item;
  };
  *batch = false;
  std::vector<Item> out;
  if (v.is_string()) {
    out.push_back({v.get<std::string>(), {}, {}});
    return out;
  }
  if (!v.is_array())
    return Validation(
        std::string("\"") + field + "\" must be a string, a list of token ids, or a list of those",
        field);
  if (v.empty()) return Empty(std::string("`") + field + "` cannot be empty", field);
  if (v[0].is_number()) {  // one input as token ids
    ASSIGN_OR_RETURN(Item item, ids(v, 0));
    out.push_back(std::move(item));
    return out;
  }
  *batch = true;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].is_string()) {
      out.push_back({v[i].get<std::string>(), {}, {}});
    } else if (v[i].is_array()) {
      ASSIGN_OR_RETURN(Item item, ids(v[i], i));
      out.push_back(std::move(item));
    } else {
      return Validation(std::string("\"") + field + "\" item " + std::to_string(i) +
                            " must be a string or a list of token ids",
                        field);
    }
  }
  return out;
}

// The inputs of `field`: ReadTextsBody's texts when it read the body, else ReadInputs.
Result<std::vector<Item>> Inputs(const Call& c, const char* field, bool* batch) {
  if (!c.texts) return ReadInputs(c.body, field, batch);
  std::vector<Item> items;
  items.reserve(c.texts->texts.size());
  for (std::string& text : c.texts->texts) items.push_back({std::move(text), {}, {}});
  *batch = c.texts->batch;
  return items;
}

// --- Embeddings -----------------------------------------------------------------

struct EmbedOptions {
  EncodeOptions encode;
  serving::EmbeddingOptions embedding;
};

Result<EmbedOptions> ReadEmbedOptions(const json& body, bool with_normalize) {
  EmbedOptions o;
  ASSIGN_OR_RETURN(o.encode, ReadEncodeOptions(body));
  if (with_normalize) {
    ASSIGN_OR_RETURN(o.embedding.normalize, Bool(body, "normalize", true));
  }
  // 0 asks for the full width, as Infinity's client sends it.
  auto d = body.find("dimensions");
  if (d != body.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<int64_t>() < 0 || d->get<int64_t>() > INT32_MAX)
      return Validation("`dimensions` should be a positive integer (or 0: the full width)",
                        "dimensions");
    if (d->get<int64_t>() > 0) o.embedding.dimensions = static_cast<int>(d->get<int64_t>());
  }
  return o;
}

// Pooled embeddings of `items` (serving::Infer::Embed).
Result<std::vector<std::vector<float>>> EmbedItems(const Call& c, std::vector<Item> items,
                                                   const EmbedOptions& o) {
  auto request = c.infer.PrepareEmbed(o.embedding);
  if (!request.ok()) {
    ApiError e = FromStatus(request.status());
    if (request.status().code() == StatusCode::kInvalidArgument) e.param = "dimensions";
    return e;
  }
  return c.infer.Embed(*request, std::move(items), o.encode);
}

Result<JsonText> Embed(const Call& c) {
  bool batch = false;
  ASSIGN_OR_RETURN(auto items, Inputs(c, "inputs", &batch));
  RETURN_IF_API_ERROR(CheckBatch(c.model(), items.size(), "inputs"));
  ASSIGN_OR_RETURN(EmbedOptions o, ReadEmbedOptions(c.body, true));
  ASSIGN_OR_RETURN(auto rows, EmbedItems(c, std::move(items), o));
  JsonText out;
  out.text.reserve(rows.size() * (rows.empty() ? 0 : rows[0].size()) * 12 + 2);
  out.text.push_back('[');
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out.text.push_back(',');
    AppendJsonFloats(out.text, rows[i].data(), rows[i].size());
  }
  out.text.push_back(']');
  return out;
}

Result<json> EmbedAll(const Call& c) {
  bool batch = false;
  ASSIGN_OR_RETURN(auto items, ReadInputs(c.body, "inputs", &batch));
  RETURN_IF_API_ERROR(CheckBatch(c.model(), items.size(), "inputs"));
  ASSIGN_OR_RETURN(EncodeOptions o, ReadEncodeOptions(c.body));
  ASSIGN_OR_RETURN(auto states, c.infer.EmbedAll(std::move(items), o));
  json out = json::array();
  for (const serving::TokenVectors& s : states) {
    json tokens = json::array();
    for (int t = 0; t < s.tokens; ++t)
      tokens.push_back(FloatArray(s.values.data() + static_cast<size_t>(t) * s.width, s.width));
    out.push_back(std::move(tokens));
  }
  return out;
}

// A SPLADE model's sparse vector, as TEI answers: per input, its non-zero
// entries as {"index": vocabulary id, "value": weight} in id order.
Result<json> EmbedSparse(const Call& c) {
  bool batch = false;
  ASSIGN_OR_RETURN(auto items, ReadInputs(c.body, "inputs", &batch));
  RETURN_IF_API_ERROR(CheckBatch(c.model(), items.size(), "inputs"));
  ASSIGN_OR_RETURN(EncodeOptions o, ReadEncodeOptions(c.body));
  ASSIGN_OR_RETURN(auto sparse, c.infer.EmbedSparse(std::move(items), o));
  json vectors = json::array();
  for (const auto& entries : sparse) {
    json list = json::array();
    for (const serving::SparseEntry& e : entries)
      list.push_back({{"index", e.index}, {"value", FloatJson(e.value)}});
    vectors.push_back(std::move(list));
  }
  return vectors;
}

// /similarity: {"inputs": {"source_sentence", "sentences"}, "parameters": {...}}
// -> the cosine similarity of each sentence to the source sentence.
Result<json> Similarity(const Call& c) {
  auto in = c.body.find("inputs");
  if (in == c.body.end() || !in->is_object() || !in->contains("source_sentence") ||
      !(*in)["source_sentence"].is_string() || !in->contains("sentences") ||
      !(*in)["sentences"].is_array())
    return Validation(
        "expected {\"inputs\": {\"source_sentence\": str, \"sentences\": [str, ...]}}", "inputs");
  const json& sentences = (*in)["sentences"];
  if (sentences.empty()) return Empty("`inputs.sentences` cannot be empty", "inputs");
  RETURN_IF_API_ERROR(CheckBatch(c.model(), sentences.size() + 1, "inputs.sentences"));
  std::vector<std::string> texts;
  for (const json& s : sentences) {
    if (!s.is_string()) return Validation("\"inputs.sentences\" must hold strings", "inputs");
    texts.push_back(s.get<std::string>());
  }
  EncodeOptions o;
  auto p = c.body.find("parameters");
  if (p != c.body.end() && !p->is_null()) {
    if (!p->is_object()) return Validation("\"parameters\" must be an object", "parameters");
    ASSIGN_OR_RETURN(o, ReadEncodeOptions(*p));
  }
  ASSIGN_OR_RETURN(auto similarities,
                   c.infer.Similarity((*in)["source_sentence"].get<std::string>(),
                                      std::move(texts), o));
  json out = json::array();
  for (float s : similarities) out.push_back(FloatJson(s));
  return out;
}

// --- Classification ----------------------------------------------------------------

// TEI's PredictInput: "a" | ["a", "b"] (a pair) | [["a"], ["a", "b"], ...]
// (a batch; bertrt also takes plain strings as its items, and a list of more
// than two strings as a batch of texts).
Result<std::vector<TextInput>> ReadPredictInputs(const json& body, bool* batch) {
  auto it = body.find("inputs");
  const char* expected =
      "\"inputs\" must be a string, a pair [text, text_pair], or a batch [[text], "
      "[text, text_pair], ...]";
  if (it == body.end()) return Validation(expected, "inputs");
  const json& v = *it;
  *batch = false;
  if (v.is_string()) return std::vector<TextInput>{{v.get<std::string>(), std::nullopt}};
  if (!v.is_array()) return Validation(expected, "inputs");
  if (v.empty()) return Empty("`inputs` cannot be empty", "inputs");
  // One text or one pair; more strings are a batch of texts (bertrt's own form).
  if (v[0].is_string() && v.size() <= 2 && v.back().is_string()) {
    if (v.size() == 1) return std::vector<TextInput>{{v[0].get<std::string>(), std::nullopt}};
    return std::vector<TextInput>{{v[0].get<std::string>(), v[1].get<std::string>()}};
  }
  *batch = true;
  std::vector<TextInput> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    if (e.is_string()) {
      out.push_back({e.get<std::string>(), std::nullopt});
    } else if (e.is_array() && (e.size() == 1 || e.size() == 2) && e[0].is_string() &&
               e.back().is_string()) {
      out.push_back({e[0].get<std::string>(),
                     e.size() == 2 ? std::optional(e[1].get<std::string>()) : std::nullopt});
    } else {
      return Validation(std::string(expected) + "; item " + std::to_string(i) + " is not",
                        "inputs");
    }
  }
  return out;
}

// raw_scores: the logits, else the model's default function.
serving::PredictOptions RawScores(bool raw) {
  serving::PredictOptions predict;
  if (raw) predict.function = serving::ScoreFunction::kNone;
  return predict;
}

// Each input's [{score, label}], best first.
Result<json> Classify(const Call& c, const std::vector<TextInput>& inputs, const EncodeOptions& o,
                      const serving::PredictOptions& predict) {
  ASSIGN_OR_RETURN(auto all, c.infer.Predict(inputs, o, predict));
  json out = json::array();
  for (const auto& ranked : all) {
    json preds = json::array();
    for (const serving::LabelScore& s : ranked)
      preds.push_back(
          {{"score", FloatJson(s.score)}, {"label", c.model().config().LabelName(s.label)}});
    out.push_back(std::move(preds));
  }
  return out;
}

Result<json> Predict(const Call& c) {
  bool batch = false;
  ASSIGN_OR_RETURN(auto inputs, ReadPredictInputs(c.body, &batch));
  if (batch) RETURN_IF_API_ERROR(CheckBatch(c.model(), inputs.size(), "inputs"));
  ASSIGN_OR_RETURN(EncodeOptions o, ReadEncodeOptions(c.body));
  ASSIGN_OR_RETURN(bool raw, Bool(c.body, "raw_scores", false));
  ASSIGN_OR_RETURN(json all, Classify(c, inputs, o, RawScores(raw)));
  return batch ? all : all[0];
}

// An answer as Infinity's API gives one: `payload` under `key`, with the
// object's kind, the model, the request's tokens as usage, an id and the time.
json InfinityAnswer(const Call& c, const std::string& object, const char* key, json payload) {
  const int tokens = c.infer.tokens();
  static std::atomic<uint64_t> next_id{0};
  return json{{"object", object},
              {key, std::move(payload)},
              {"model", c.model().name()},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}},
              {"id", object + "-" + std::to_string(next_id.fetch_add(1))},
              {"created", std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count()}};
}

// Infinity's /classify: {"input": [texts], "raw_scores", "model"} answered as
// Infinity does, each text's labels best first (as /predict's), with usage.
Result<json> InfinityClassify(const Call& c) {
  auto input = c.body.find("input");
  if (input == c.body.end() || !input->is_array())
    return Validation("expected {\"input\": [str, ...]}: \"input\" must be a list of texts",
                      "input");
  if (input->empty()) return Empty("`input` cannot be empty", "input");
  std::vector<TextInput> inputs;
  for (const json& t : *input) {
    if (!t.is_string()) return Validation("\"input\" must hold strings", "input");
    inputs.push_back({t.get<std::string>(), std::nullopt});
  }
  RETURN_IF_API_ERROR(CheckBatch(c.model(), inputs.size(), "input"));
  ASSIGN_OR_RETURN(bool raw, Bool(c.body, "raw_scores", false));
  EncodeOptions o;
  o.truncate_field = false;
  ASSIGN_OR_RETURN(json all, Classify(c, inputs, o, RawScores(raw)));
  return InfinityAnswer(c, "classify", "data", std::move(all));
}

// TEI's /rerank: {"query", "texts", "raw_scores", "return_text", "truncate"}
// -> [{"index", "score", "text"?}], best first.
Result<json> Rerank(const Call& c) {
  const json& body = c.body;
  if (!body.contains("query") || !body["query"].is_string())
    return Validation(
        "expected {\"query\": str, \"texts\": [str, ...]}: \"query\" must be a string", "query");
  if (!body.contains("texts") || !body["texts"].is_array())
    return Validation("expected {\"query\": str, \"texts\": [str, ...]}: \"texts\" must be a list",
                      "texts");
  const json& list = body["texts"];
  if (list.empty()) return Empty("`texts` cannot be empty", "texts");
  std::vector<std::string> texts;
  for (const json& t : list) {
    if (!t.is_string()) return Validation("\"texts\" must hold strings", "texts");
    texts.push_back(t.get<std::string>());
  }
  RETURN_IF_API_ERROR(CheckBatch(c.model(), texts.size(), "texts"));
  ASSIGN_OR_RETURN(EncodeOptions o, ReadEncodeOptions(body));
  ASSIGN_OR_RETURN(bool raw, Bool(body, "raw_scores", false));
  ASSIGN_OR_RETURN(bool return_text, Bool(body, "return_text", false));
  ASSIGN_OR_RETURN(auto ranked, c.infer.Rerank(body["query"].get<std::string>(), texts, o, raw));
  json out = json::array();
  for (const serving::RankedText& r : ranked) {
    json e{{"index", r.index}, {"score", FloatJson(r.score)}};
    if (return_text) e["text"] = texts[r.index];
    out.push_back(std::move(e));
  }
  return out;
}

// How many results at most (a rerank body's "top_n", a task's "top_k"):
// absent or null, all.
Result<std::optional<size_t>> TopN(const json& body, const char* field = "top_n") {
  auto n = body.find(field);
  if (n == body.end() || n->is_null()) return std::optional<size_t>();
  if (!n->is_number_integer() || n->get<int64_t>() < 1)
    return Validation("`" + std::string(field) + "` should be a positive integer", field);
  return std::optional<size_t>(std::min<int64_t>(n->get<int64_t>(), INT32_MAX));
}

// The documents of a Cohere-, Jina- or Infinity-style rerank body ({"query",
// "documents", "top_n", "return_documents"}), ranked by /rerank's scores
// (the logits with `raw`), best first, at most top_n; a document longer than
// the model takes is cut to it, as Cohere's API cuts (max_tokens_per_doc).
// `objects`: a document may also be {"text": str} (Cohere's v1).
struct RankedDocuments {
  std::vector<std::string> texts;
  std::vector<serving::RankedText> ranked;
  bool return_documents = false;
};
Result<RankedDocuments> RankDocuments(const Call& c, bool objects, bool raw) {
  const json& body = c.body;
  const std::string expected = objects ? "expected {\"query\": str, \"documents\": [str or "
                                         "{\"text\": str}, ...]}"
                                       : "expected {\"query\": str, \"documents\": [str, ...]}";
  auto query = body.find("query");
  if (query == body.end() || !query->is_string())
    return Validation(expected + ": \"query\" must be a string", "query");
  auto docs = body.find("documents");
  if (docs == body.end() || !docs->is_array())
    return Validation(expected + ": \"documents\" must be a list", "documents");
  if (docs->empty()) return Empty("`documents` cannot be empty", "documents");
  RankedDocuments out;
  for (const json& d : *docs) {
    const json* text = objects && d.is_object() && d.contains("text") ? &d["text"] : &d;
    if (!text->is_string())
      return Validation(objects ? "\"documents\" must hold strings or {\"text\": str} objects"
                                : "\"documents\" must hold strings",
                        "documents");
    out.texts.push_back(text->get<std::string>());
  }
  RETURN_IF_API_ERROR(CheckBatch(c.model(), out.texts.size(), "documents"));
  ASSIGN_OR_RETURN(std::optional<size_t> top_n, TopN(body));
  ASSIGN_OR_RETURN(out.return_documents, Bool(body, "return_documents", false));
  EncodeOptions o;
  o.truncate = true;
  ASSIGN_OR_RETURN(out.ranked, c.infer.Rerank(query->get<std::string>(), out.texts, o, raw));
  if (top_n && out.ranked.size() > *top_n) out.ranked.resize(*top_n);
  return out;
}

// Cohere's and Jina's rerank (`POST /v1/rerank`, `/v2/rerank`) -> {"id",
// "results": [{"index", "relevance_score", "document"?}], "meta"}.
Result<json> CohereRerank(const Call& c) {
  ASSIGN_OR_RETURN(const RankedDocuments docs, RankDocuments(c, true, false));
  json results = json::array();
  for (const serving::RankedText& r : docs.ranked) {
    json e{{"index", r.index}, {"relevance_score", FloatJson(r.score)}};
    if (docs.return_documents) e["document"] = {{"text", docs.texts[r.index]}};
    results.push_back(std::move(e));
  }
  static std::atomic<uint64_t> next_id{0};
  return json{{"id", "rerank-" + std::to_string(next_id.fetch_add(1))},
              {"results", std::move(results)},
              {"meta", {{"billed_units", {{"search_units", 1}}}}}};
}

// Infinity's rerank, on TEI's path (its body also takes "raw_scores" and
// "model") -> {"object": "rerank", "results": [{"relevance_score", "index",
// "document"}], "model", "usage", ...}.
Result<json> InfinityRerank(const Call& c) {
  ASSIGN_OR_RETURN(bool raw, Bool(c.body, "raw_scores", false));
  ASSIGN_OR_RETURN(const RankedDocuments docs, RankDocuments(c, false, raw));
  json results = json::array();
  for (const serving::RankedText& r : docs.ranked)
    results.push_back({{"relevance_score", FloatJson(r.score)},
                       {"index", r.index},
                       {"document", docs.return_documents ? json(docs.texts[r.index]) : json()}});
  return InfinityAnswer(c, "rerank", "results", std::move(results));
}

// POST /rerank: TEI's body ("texts"), or Infinity's ("documents" alone).
Result<json> TeiOrInfinityRerank(const Call& c) {
  return c.body.contains("documents") && !c.body.contains("texts") ? InfinityRerank(c) : Rerank(c);
}

// --- Tokenizer routes -------------------------------------------------------------

Result<json> Tokenize(const Call& c) {
  auto it = c.body.find("inputs");
  std::vector<std::string> texts;
  if (it != c.body.end() && it->is_string()) {
    texts.push_back(it->get<std::string>());
  } else if (it != c.body.end() && it->is_array()) {
    if (it->empty()) return Empty("`inputs` cannot be empty", "inputs");
    for (const json& t : *it) {
      if (!t.is_string()) return Validation("\"inputs\" must hold strings", "inputs");
      texts.push_back(t.get<std::string>());
    }
  } else {
    return Validation("expected {\"inputs\": str | [str, ...]}", "inputs");
  }
  // As /embed takes: at most max_client_batch_size texts of at most
  // max_input_length tokens each (1M CJK characters made a 71 MB answer).
  RETURN_IF_API_ERROR(CheckBatch(c.model(), texts.size(), "inputs"));
  ASSIGN_OR_RETURN(bool add_special, Bool(c.body, "add_special_tokens", true));
  ASSIGN_OR_RETURN(
      EncodeOptions o,
      ReadEncodeOptions(json::object({{"prompt_name", c.body.value("prompt_name", json())}})));
  auto tokenized = c.infer.Tokenize(texts, o.prompt_name, add_special);
  if (!tokenized.ok()) {
    // A text too long to normalize is too large a payload (as KServe's 413);
    // one the tokenizer cannot take is TEI's tokenizer error.
    const Status& s = tokenized.status();
    if (s.code() == StatusCode::kOutOfRange)
      return ApiError{413, ErrorType::kValidation, s.message(), "inputs"};
    if (s.code() != StatusCode::kInvalidArgument)
      return ApiError{422, ErrorType::kTokenizer, s.message(), "inputs"};
    return Validation(s.message(), "inputs");
  }
  json all = json::array();
  for (const auto& tokens : *tokenized) {
    json list = json::array();
    for (const serving::Token& t : tokens) {
      // Added by the template ([CLS], [SEP]): TEI gives the token, no offsets.
      list.push_back({{"id", t.id},
                      {"text", t.text},
                      {"special", t.special},
                      {"start", t.special ? json(nullptr) : json(t.start)},
                      {"stop", t.special ? json(nullptr) : json(t.stop)}});
    }
    all.push_back(std::move(list));
  }
  return all;
}

Result<json> Decode(const Call& c) {
  auto it = c.body.find("ids");
  const char* expected = "expected {\"ids\": [int, ...] | [[int, ...], ...]}";
  if (it == c.body.end() || !it->is_array()) return Validation(expected, "ids");
  std::vector<std::vector<int32_t>> lists;
  const bool batch = !it->empty() && (*it)[0].is_array();
  if (!batch) {
    lists.emplace_back();
  } else {
    RETURN_IF_API_ERROR(CheckBatch(c.model(), it->size(), "ids"));
  }
  for (const json& e : *it) {
    if (batch && !e.is_array()) return Validation(expected, "ids");
    if (batch) lists.emplace_back();
    for (const json& id : batch ? e : json::array({e})) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        return Validation("token id " + id.dump() + " is not in the vocabulary (ids go from 0 to " +
                              std::to_string(c.model().tokenizer().vocab_size() - 1) + ")",
                          "ids");
      lists.back().push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  for (const auto& ids : lists)
    if (ids.empty()) return Empty("`input_ids` cannot be empty", "ids");
  ASSIGN_OR_RETURN(bool skip, Bool(c.body, "skip_special_tokens", true));
  auto texts = c.infer.Decode(lists, skip);
  if (!texts.ok()) return Validation(texts.status().message(), "ids");
  return json(*texts);
}

// --- OpenAI -----------------------------------------------------------------------

std::string Base64(const unsigned char* p, size_t n) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) |
                       (i + 2 < n ? uint32_t(p[i + 2]) : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < n ? kAlphabet[v >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// OpenAI's base64 embedding: the float32 values' little-endian bytes.
std::string Base64Floats(const std::vector<float>& v) {
  std::vector<unsigned char> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<unsigned char>(u >> (8 * b));
  }
  return Base64(bytes.data(), bytes.size());
}

Result<JsonText> OpenAiEmbeddings(const Call& c) {
  const json& body = c.body;
  bool batch = false;
  ASSIGN_OR_RETURN(auto items, Inputs(c, "input", &batch));
  RETURN_IF_API_ERROR(CheckBatch(c.model(), items.size(), "input"));
  bool base64 = false;
  auto format = body.find("encoding_format");
  if (format != body.end() && !format->is_null()) {
    if (*format != "float" && *format != "base64")
      return Validation(
          "\"encoding_format\" must be \"float\" or \"base64\", not " + format->dump(),
          "encoding_format");
    base64 = *format == "base64";
  }
  // As TEI: every vector normalized, truncated only under --auto-truncate.
  ASSIGN_OR_RETURN(
      EmbedOptions o,
      ReadEmbedOptions(json::object({{"dimensions", body.value("dimensions", json())}}), false));
  o.encode.truncate_field = false;
  ASSIGN_OR_RETURN(auto rows, EmbedItems(c, std::move(items), o));
  const int tokens = c.infer.tokens();
  // OpenAI's list, written straight (JsonText).
  JsonText out;
  out.text = R"({"object":"list","data":[)";
  for (size_t i = 0; i < rows.size(); ++i) {
    out.text += i ? R"(,{"object":"embedding","index":)" : R"({"object":"embedding","index":)";
    out.text += std::to_string(i) + R"(,"embedding":)";
    if (base64) {
      out.text += '"' + Base64Floats(rows[i]) + '"';
    } else {
      AppendJsonFloats(out.text, rows[i].data(), rows[i].size());
    }
    out.text.push_back('}');
  }
  out.text += R"(],"model":)" +
              json(c.model().name()).dump(-1, ' ', false, json::error_handler_t::replace) +
              R"(,"usage":{"prompt_tokens":)" + std::to_string(tokens) +
              R"(,"total_tokens":)" + std::to_string(tokens) + "}}";
  return out;
}

// --- /info, POST / ---------------------------------------------------------------

// TEI's "pooling" is one name; concatenated modes are joined with "+".
std::string PoolingNames(const std::vector<Pooling>& modes) {
  std::string names;
  for (Pooling p : modes) names += (names.empty() ? "" : "+") + std::string(PoolingName(p));
  return names;
}

const char* DtypeName(const std::string& precision) {
  if (precision == "fp16") return "float16";
  if (precision == "bf16") return "bfloat16";
  if (precision == "int8") return "int8";
  return "float32";
}

// A model as OpenAI's `GET /v1/models` lists it, with what Infinity's `GET
// /models` adds (the backend, and what the model can be called for).
json ModelCard(ServedModel& m) {
  const ModelKind kind = KindOf(m);
  const char* capability = kind == ModelKind::kEmbedding  ? "embed"
                           : kind == ModelKind::kReranker ? "rerank"
                                                          : "classify";
  return json{{"id", m.name()},
              {"object", "model"},
              {"created", m.loaded_unix_seconds()},
              {"owned_by", "bertrt"},
              {"backend", "bertrt"},
              {"capabilities", json::array({capability})}};
}

json Info(HttpServer& s, ServedModel& m) {
  const SchedulerOptions& so = m.scheduler().options();
  json model_type;
  if (KindOf(m) == ModelKind::kEmbedding) {
    const HeadKind head = m.config().head;
    const std::string pooling = head == HeadKind::kSentenceEmbedding
                                    ? PoolingNames(m.config().pooling_modes)
                                : head == HeadKind::kBase            ? "pooler"
                                : head == HeadKind::kSparseEmbedding ? "splade"
                                                                     : "none";
    model_type = {{"embedding", {{"pooling", pooling}}}};
  } else {
    json id2label = json::object(), label2id = json::object();
    for (int i = 0; i < NumLabels(m); ++i) {
      id2label[std::to_string(i)] = m.config().LabelName(i);
      label2id[m.config().LabelName(i)] = i;
    }
    model_type = {{KindOf(m) == ModelKind::kReranker ? "reranker" : "classifier",
                   {{"id2label", id2label}, {"label2id", label2id}}}};
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return json{{"model_id", m.name()},
              {"model_sha", nullptr},
              {"model_dtype", DtypeName(m.precision())},
              {"served_model_name", m.name()},
              {"model_type", model_type},
              {"max_concurrent_requests", so.max_queue_size},
              {"max_input_length", m.max_input_length()},
              {"max_batch_tokens", so.max_batch_tokens},
              {"max_batch_requests", so.max_batch_size},
              {"max_client_batch_size", so.client_batch_limit()},
              {"auto_truncate", m.auto_truncate()},
              // Requests are tokenized on the handler threads, as many at once as cores.
              {"tokenization_workers", std::min(cores, s.options().max_handler_threads)},
              {"version", BERTRT_VERSION},
              {"sha", nullptr},
              {"docker_label", nullptr},
              // bertrt's own
              {"head", HeadKindName(m.config().head)},
              {"device", m.placement()},
              {"max_payload_bytes", s.options().max_payload_bytes}};
}

// The HF Inference API's token classification and question answering
// (huggingface_hub's token_classification and question_answering): HF
// pipelines' entities and answers.
// A long text's windows count against the request's inputs
// (max_client_batch_size): more is 413, as too many inputs are.
Result<json> PipelineTaskRoute(const Call& c) {
  const int limit = c.model().scheduler().options().client_batch_limit();
  auto request = TaskRequest::Parse(c.model(), c.body, static_cast<size_t>(limit));
  if (!request.ok() && request.status().code() == StatusCode::kResourceExhausted)
    return ApiError{413, ErrorType::kValidation,
                    request.status().message() +
                        " (max_client_batch_size in /info; the server's "
                        "--max-client-batch-size): shorten the text, lower the stride or send "
                        "fewer inputs",
                    "inputs"};
  if (!request.ok()) return request.status();
  std::vector<const serving::Task*> tasks;
  request->AppendTasks(tasks);
  ASSIGN_OR_RETURN(auto answers, c.infer.RunTasks(tasks));
  return request->Answer(answers);
}

// The HF Inference API's text-classification task on POST / (what
// huggingface_hub's text_classification posts: a "parameters" object, maybe
// empty): {"inputs": a text or {"text", "text_pair"}, "parameters": {"top_k",
// "function_to_apply"}} -> [[{label, score}, ...]], best first, top_k of them
// (default all); function_to_apply "softmax", "sigmoid" or "none" (default:
// softmax, a sigmoid for one label).
Result<json> HfTextClassification(const Call& c) {
  const json& params = c.body["parameters"];
  if (!params.is_object()) return Validation("\"parameters\" must be an object", "parameters");
  serving::PredictOptions predict;
  ASSIGN_OR_RETURN(std::optional<size_t> top_k, TopN(params, "top_k"));
  predict.top_k = top_k.value_or(0);
  if (auto f = params.find("function_to_apply"); f != params.end() && !f->is_null()) {
    static const std::pair<const char*, serving::ScoreFunction> kFunctions[] = {
        {"softmax", serving::ScoreFunction::kSoftmax},
        {"sigmoid", serving::ScoreFunction::kSigmoid},
        {"none", serving::ScoreFunction::kNone}};
    auto it = std::find_if(std::begin(kFunctions), std::end(kFunctions), [&](const auto& k) {
      return f->is_string() && f->get<std::string>() == k.first;
    });
    if (it == std::end(kFunctions))
      return Validation("`function_to_apply` must be \"softmax\", \"sigmoid\" or \"none\"",
                        "function_to_apply");
    predict.function = it->second;
  }
  const json& in = c.body.value("inputs", json());
  TextInput input;
  if (in.is_string()) {
    input = {in.get<std::string>(), std::nullopt};
  } else if (in.is_object() && in.contains("text") && in["text"].is_string() &&
             (!in.contains("text_pair") || in["text_pair"].is_string())) {
    input = {in["text"].get<std::string>(),
             in.contains("text_pair") ? std::optional(in["text_pair"].get<std::string>())
                                      : std::nullopt};
  } else {
    return Validation("expected {\"inputs\": str or {\"text\": str, \"text_pair\": str}, "
                      "\"parameters\": {...}}",
                      "inputs");
  }
  ASSIGN_OR_RETURN(EncodeOptions o, ReadEncodeOptions(c.body));
  return Classify(c, {input}, o, predict);
}

// POST / and /invocations, by the model's type as TEI routes them; a body
// shaped for /similarity (huggingface_hub's sentence_similarity) or /rerank
// goes there; a token classifier's or question answerer's is the HF
// Inference API's task request.
Result<Answer> Root(const Call& c) {
  if (*PipelineTask(c.model().config())) return AsAnswer(PipelineTaskRoute(c));
  switch (KindOf(c.model())) {
    case ModelKind::kEmbedding: {
      auto in = c.body.find("inputs");
      if (in != c.body.end() && in->is_object() && in->contains("source_sentence"))
        return AsAnswer(Similarity(c));
      return AsAnswer(Embed(c));
    }
    case ModelKind::kReranker:
      if (c.body.contains("query") && c.body.contains("texts")) return AsAnswer(Rerank(c));
      [[fallthrough]];
    case ModelKind::kClassifier:
      if (c.body.contains("parameters")) return AsAnswer(HfTextClassification(c));
      return AsAnswer(Predict(c));
  }
  return AsAnswer(Predict(c));
}

bool IsOpenAiPath(std::string_view path) {
  return path == "/v1/embeddings" || path == "/embeddings";
}

}  // namespace

// The route under /models/{name}/... (a model's own TEI routes).
std::string_view WithoutModelPrefix(std::string_view path) {
  constexpr std::string_view kModels = "/models/";
  if (path.substr(0, kModels.size()) != kModels) return path;
  const size_t slash = path.find('/', kModels.size());
  return slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
}

bool IsTeiPath(std::string_view target) {
  const std::string_view path = WithoutModelPrefix(target.substr(0, target.find('?')));
  static const char* kPaths[] = {
      "/embed",  "/embed_all", "/embed_sparse", "/predict", "/rerank", "/similarity", "/tokenize",
      "/decode", "/",          "/invocations",  "/info",    "/health", "/ping", "/v1/rerank",
      "/v2/rerank", "/classify"};
  return IsOpenAiPath(path) ||
         std::find(std::begin(kPaths), std::end(kPaths), path) != std::end(kPaths);
}

json TeiErrorJson(std::string_view target, int status, const std::string& message) {
  const ApiError e{status, status >= 500 ? ErrorType::kBackend : ErrorType::kValidation, message,
                   ""};
  return IsOpenAiPath(WithoutModelPrefix(target.substr(0, target.find('?'))))
             ? OpenAiErrorBody(e)
             : TeiErrorBody(e);
}

namespace {
const std::string kModelPrefix = "/models/{model}";
}  // namespace

void HttpServer::AddTeiRoutes() {
  using Request = HttpRequest;
  using Response = HttpResponse;
  // Every route also under /models/{name}: a TEI client's base URL picks one of
  // the repository's models (the bare routes serve the default model). The root,
  // where huggingface_hub's InferenceClient posts, is /models/{name} with or
  // without the slash, as TEI's own base URL is.
  // The patterns of `path`: bare, and under /models/{model}, the root both
  // with and without its trailing slash.
  auto patterns = [](const std::string& path, bool named) -> std::vector<std::string> {
    if (!named) return {path};
    if (path == "/") return {kModelPrefix, kModelPrefix + "/"};
    return {kModelPrefix + path};
  };
  // openai: OpenAI's error bodies; model_field: the body's "model" picks one of
  // several served models (OpenAI's and Cohere's bodies name one);
  // texts_field: the field of texts ReadTextsBody reads without a tree.
  auto post = [this, patterns](const std::string& path, auto handler, bool openai = false,
                               bool model_field = false, const char* texts_field = nullptr) {
    model_field = model_field || openai;
    for (const bool named : {false, true}) {
      Handler route = [this, path, handler, openai, model_field, texts_field, named](
                          const Request& req, Response& res) {
      InFlightGuard in_flight(metrics_);
      const auto arrival = RequestTimer::Clock::now();
      auto model = named ? registry_.Find(req.params["model"]) : registry_.Default();
      std::optional<RequestTimer> timer;  // made once the model is known and the body read
      auto answer = [&]() -> Result<Answer> {
        if (!model.ok()) return model.status();
        std::optional<TextsBody> texts;
        if (texts_field && !req.has_header("Inference-Header-Content-Length"))
          texts = ReadTextsBody(req.body, texts_field);
        auto body = texts ? StatusOr<json>(std::move(texts->rest)) : ParseBody(req);
        // Not JSON at all: 400, as TEI (axum) answers a syntax error.
        if (!body.ok()) return ApiError{400, ErrorType::kValidation, body.status().message(), ""};
        if (!body->is_object()) return Validation("the body must be a JSON object");
        // OpenAI's and Cohere's routes also take `model`: another of several served.
        if (model_field && !named && body->contains("model") && (*body)["model"].is_string() &&
            registry_.served_models() > 1) {
          auto named = registry_.Find((*body)["model"].get<std::string>());
          if (!named.ok()) {
            ApiError e = FromStatus(named.status());
            e.param = "model";
            return e;
          }
          model = *named;
        }
        timer.emplace(**model, &metrics_, arrival);
        serving::Infer infer(**model, *timer, req.client_gone);
        return AsAnswer(handler(Call{*this, *body, req, infer, texts ? &*texts : nullptr}));
      };
      Result<Answer> out = answer();
      if (out.ok()) {
        if (auto* text = std::get_if<JsonText>(&*out)) {
          res.status = 200;
          res.set_content(std::move(text->text), "application/json");
        } else {
          SendJson(res, 200, std::get<json>(*out));
        }
      } else {
        const ApiError& e = out.status();
        SendJson(res, e.status, openai ? OpenAiErrorBody(e) : TeiErrorBody(e));
      }
      // Inference requests count as KServe's do, a refused input as a
      // failure; /tokenize and /decode run no model. Once the body is
      // written: writing it is the request's last stage.
      const bool infers = path != "/tokenize" && path != "/decode";
      if (timer && (timer->ran() || (infers && !out.ok())))
        timer->Finish(out.ok()                     ? Status::Ok()
                      : out.status().status >= 500 ? Internal(out.status().message)
                                                   : InvalidArgument(out.status().message));
      metrics_.CountRequest(model.ok() ? (*model)->name() : "", path,
                            out.ok() ? 200 : out.status().status);
      };
      for (const std::string& pattern : patterns(path, named)) Post(pattern, path, route);
    }
  };
  post("/embed", Embed, false, false, "inputs");
  post("/embed_all", EmbedAll);
  post("/embed_sparse", EmbedSparse);
  post("/predict", Predict);
  post("/rerank", TeiOrInfinityRerank, false, true);
  post("/v1/rerank", CohereRerank, false, true);
  post("/v2/rerank", CohereRerank, false, true);
  post("/classify", InfinityClassify, false, true);
  post("/similarity", Similarity);
  post("/tokenize", Tokenize);
  post("/decode", Decode);
  post("/", Root);
  post("/invocations", Root);
  post("/v1/embeddings", OpenAiEmbeddings, true, false, "input");
  post("/embeddings", OpenAiEmbeddings, true, false, "input");
  for (const bool named : {false, true}) {
    Get(named ? kModelPrefix + "/info" : "/info", "/info",
        [this, named](const Request& req, Response& res) {
          auto m = named ? registry_.Find(req.params["model"]) : registry_.Default();
          if (!m.ok()) {
            const ApiError e = FromStatus(m.status());
            return SendJson(res, named ? e.status : 503, TeiErrorBody(e));
          }
          SendJson(res, 200, Info(*this, **m));
        });
  }
  // The served models as OpenAI's and Infinity's clients list them: each
  // name once, as its latest served version (what Find gives).
  for (const std::string path : {"/v1/models", "/models"}) {
    Get(path, path, [this](const Request&, Response& res) {
      std::set<std::string> names;
      for (const auto& m : registry_.Served()) names.insert(m->name());
      json data = json::array();
      for (const std::string& name : names)
        if (auto m = registry_.Find(name); m.ok()) data.push_back(ModelCard(**m));
      SendJson(res, 200, json{{"object", "list"}, {"data", std::move(data)}});
    });
  }
  Get("/v1/models/{model}", "/v1/models", [this](const Request& req, Response& res) {
    auto m = registry_.Find(req.params["model"]);
    if (!m.ok()) {
      ApiError e = FromStatus(m.status());
      e.param = "model";
      return SendJson(res, e.status, OpenAiErrorBody(e));
    }
    SendJson(res, 200, ModelCard(**m));
  });
  // TEI's health routes: 200 with an empty body while the server serves, 503
  // when not. Open, so they say nothing more; under /models/{name} (while
  // that model is served) behind the key, as a model's name is information.
  for (const std::string path : {"/health", "/", "/ping"}) {
    for (const bool named : {false, true}) {
      auto health = [this, named](const Request& req, Response& res) {
        const bool ready =
            named ? registry_.Find(req.params["model"]).ok() : registry_.Readiness().ok();
        if (!ready)
          return SendJson(res, 503, json{{"error", "not ready"}, {"error_type", "Unhealthy"}});
        res.status = 200;
        res.set_content("", "text/plain");
      };
      for (const std::string& pattern : patterns(path, named)) {
        if (named)
          Get(pattern, "/health", health);
        else
          GetOpen(pattern, health);
      }
    }
  }
}

}  // namespace bertrt::server

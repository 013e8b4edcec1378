// text-embeddings-inference compatible endpoints (/embed, /predict, /rerank,
// /tokenize, /info) and OpenAI's /v1/embeddings, on the registry's default model.
#include <algorithm>
#include <cmath>

#include "core/json_float.h"
#include "server/http/http_server.h"

namespace bertrt::server {
using nlohmann::json;

namespace {

// "inputs": str | [str]; `batch` says which form it was.
StatusOr<std::vector<std::string>> TextList(const json& v, const char* field, bool* batch) {
  std::vector<std::string> out;
  *batch = v.is_array();
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array() && !v.empty()) {
    for (const json& e : v) {
      if (!e.is_string())
        return InvalidArgument(std::string("\"") + field + "\" must hold strings");
      out.push_back(e.get<std::string>());
    }
  } else {
    return InvalidArgument(std::string("\"") + field +
                           "\" must be a string or a non-empty list of strings");
  }
  return out;
}

bool Flag(const json& body, const char* name, bool fallback) {
  auto it = body.find(name);
  return it != body.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// What a TEI-style handler gets: the server, the model, the parsed body and
// the request (whose client's going RunTexts hands the scheduler).
struct Call {
  HttpServer& server;
  ServedModel& model;
  const json& body;
  const HttpRequest& req;
};

// Tokenizes and runs `inputs` on the model; the result holds every row.
StatusOr<InferResult> RunTexts(const Call& c, ServedModel& m, const std::vector<TextInput>& inputs,
                               bool truncate) {
  InferRequest request;
  request.is_cancelled = c.req.client_gone;
  for (const TextInput& t : inputs) {
    ASSIGN_OR_RETURN(SequenceInput seq, m.Encode(t, truncate));
    request.sequences.push_back(std::move(seq));
  }
  return RunOn(m, c.server.metrics(), std::move(request));
}

// The pooled vector per row: the sentence embedding, else BertModel's pooler.
StatusOr<std::vector<std::vector<float>>> Embeddings(const InferResult& r, bool normalize) {
  const NamedOutput* o = r.outputs.Find("embedding");
  if (!o) o = r.outputs.Find("pooler_output");
  if (!o)
    return InvalidArgument("this model has no embedding output (a classification or token head)");
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i + 1 < r.cu_seqlens.size(); ++i) {
    std::vector<float> row(o->data.begin() + i * o->width, o->data.begin() + (i + 1) * o->width);
    if (normalize) {
      double norm = 0;
      for (float v : row) norm += double(v) * v;
      norm = std::max(std::sqrt(norm), 1e-12);
      for (float& v : row) v = static_cast<float>(v / norm);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

json Floats(const std::vector<float>& v) { return FloatArray(v.data(), v.size()); }

std::vector<float> Softmax(const float* logits, int n) {
  std::vector<float> p(logits, logits + n);
  const float top = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (float& v : p) sum += (v = std::exp(v - top));
  for (float& v : p) v = static_cast<float>(v / sum);
  return p;
}

StatusOr<const NamedOutput*> ClassLogits(const ServedModel& m, const InferResult& r) {
  const NamedOutput* o = r.outputs.Find("logits");
  if (m.config().head != HeadKind::kSequenceClassification || !o)
    return InvalidArgument("this endpoint needs a sequence-classification model");
  return o;
}

std::string Label(const ModelConfig& c, int i) {
  return i < static_cast<int>(c.labels.size()) ? c.labels[i] : "LABEL_" + std::to_string(i);
}

// /predict input: str | [a, b] (one pair) | [item, ...] with item str or [a, b].
StatusOr<std::vector<TextInput>> PredictInputs(const json& v, bool* batch) {
  auto item = [](const json& e) -> StatusOr<TextInput> {
    if (e.is_string()) return TextInput{e.get<std::string>(), std::nullopt};
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string())
      return TextInput{e[0].get<std::string>(), e[1].get<std::string>()};
    return InvalidArgument("\"inputs\" items must be strings or [text, text_pair] pairs");
  };
  *batch = false;
  if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()) {
    ASSIGN_OR_RETURN(TextInput pair, item(v));
    return std::vector<TextInput>{pair};
  }
  std::vector<TextInput> out;
  if (!v.is_array()) {
    ASSIGN_OR_RETURN(TextInput one, item(v));
    out.push_back(std::move(one));
    return out;
  }
  if (v.empty()) return InvalidArgument("\"inputs\" is empty");
  *batch = true;
  for (const json& e : v) {
    ASSIGN_OR_RETURN(TextInput t, item(e));
    out.push_back(std::move(t));
  }
  return out;
}

StatusOr<json> Embed(const Call& c) {
  ServedModel& m = c.model;
  const json& body = c.body;
  if (!body.is_object() || !body.contains("inputs"))
    return InvalidArgument("expected {\"inputs\": ...}");
  bool batch = false;
  ASSIGN_OR_RETURN(auto texts, TextList(body["inputs"], "inputs", &batch));
  std::vector<TextInput> inputs;
  for (auto& t : texts) inputs.push_back({std::move(t), std::nullopt});
  ASSIGN_OR_RETURN(InferResult r, RunTexts(c, m, inputs, Flag(body, "truncate", false)));
  ASSIGN_OR_RETURN(auto rows, Embeddings(r, Flag(body, "normalize", true)));
  json out = json::array();
  for (const auto& row : rows) out.push_back(Floats(row));
  return out;
}

StatusOr<json> Predict(const Call& c) {
  ServedModel& m = c.model;
  const json& body = c.body;
  if (!body.is_object() || !body.contains("inputs"))
    return InvalidArgument("expected {\"inputs\": ...}");
  bool batch = false;
  ASSIGN_OR_RETURN(auto inputs, PredictInputs(body["inputs"], &batch));
  ASSIGN_OR_RETURN(InferResult r, RunTexts(c, m, inputs, Flag(body, "truncate", false)));
  ASSIGN_OR_RETURN(const NamedOutput* logits, ClassLogits(m, r));
  const bool raw = Flag(body, "raw_scores", false);
  json all = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float* row = logits->data.data() + i * logits->width;
    std::vector<float> scores =
        raw ? std::vector<float>(row, row + logits->width) : Softmax(row, logits->width);
    std::vector<int> order(scores.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return scores[a] > scores[b]; });
    json preds = json::array();
    for (int k : order)
      preds.push_back({{"score", FloatJson(scores[k])}, {"label", Label(m.config(), k)}});
    all.push_back(std::move(preds));
  }
  return batch ? all : all[0];
}

StatusOr<json> Rerank(const Call& c) {
  ServedModel& m = c.model;
  const json& body = c.body;
  if (!body.is_object() || !body.contains("query") || !body["query"].is_string() ||
      !body.contains("texts"))
    return InvalidArgument("expected {\"query\": str, \"texts\": [str, ...]}");
  bool batch = false;
  ASSIGN_OR_RETURN(auto texts, TextList(body["texts"], "texts", &batch));
  std::vector<TextInput> inputs;
  for (const auto& t : texts) inputs.push_back({body["query"].get<std::string>(), t});
  ASSIGN_OR_RETURN(InferResult r, RunTexts(c, m, inputs, Flag(body, "truncate", false)));
  ASSIGN_OR_RETURN(const NamedOutput* logits, ClassLogits(m, r));
  const bool raw = Flag(body, "raw_scores", false);
  std::vector<std::pair<float, size_t>> scored;
  for (size_t i = 0; i < texts.size(); ++i) {
    const float* row = logits->data.data() + i * logits->width;
    // One logit: a relevance score (sigmoid); several: the last class's probability.
    float score = logits->width == 1
                      ? (raw ? row[0] : 1.0f / (1.0f + std::exp(-row[0])))
                      : (raw ? row[logits->width - 1] : Softmax(row, logits->width).back());
    scored.push_back({score, i});
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](auto& a, auto& b) { return a.first > b.first; });
  json out = json::array();
  for (const auto& [score, i] : scored) {
    json e{{"index", i}, {"score", FloatJson(score)}};
    if (Flag(body, "return_text", false)) e["text"] = texts[i];
    out.push_back(std::move(e));
  }
  return out;
}

// Code-point offsets (what the tokenizer gives) to byte offsets (what TEI gives).
std::vector<size_t> BytePositions(const std::string& s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) at.push_back(i);
  at.push_back(s.size());
  return at;
}

StatusOr<json> Tokenize(ServedModel& m, const json& body) {
  if (!body.is_object() || !body.contains("inputs"))
    return InvalidArgument("expected {\"inputs\": ...}");
  bool batch = false;
  ASSIGN_OR_RETURN(auto texts, TextList(body["inputs"], "inputs", &batch));
  // What /embed would take, as TEI: at most max_client_batch_size texts of at
  // most max_input_length tokens each (1M CJK characters made a 71 MB answer,
  // and the server's memory grew by as much each time).
  RETURN_IF_ERROR(m.scheduler().options().CheckClientBatch(texts.size()));
  json all = json::array();
  for (const std::string& text : texts) {
    ASSIGN_OR_RETURN(Encoding enc, m.tokenizer().Encode(text));
    if (enc.input_ids.size() > static_cast<size_t>(m.max_input_length()))
      return OutOfRange(
          "input " + std::to_string(all.size()) + " is " + std::to_string(enc.input_ids.size()) +
          " tokens, more than the model's max_input_length " +
          std::to_string(m.max_input_length()) + "; /tokenize answers for what the model takes");
    const std::vector<size_t> at = BytePositions(text);
    json tokens = json::array();
    for (size_t i = 0; i < enc.input_ids.size(); ++i) {
      const auto [b, e] = enc.offsets[i];
      const size_t start = at[std::min<size_t>(b, at.size() - 1)],
                   stop = at[std::min<size_t>(e, at.size() - 1)];
      tokens.push_back({{"id", enc.input_ids[i]},
                        {"text", m.tokenizer().IdToToken(enc.input_ids[i])},
                        {"special", enc.special_tokens_mask[i] != 0},
                        {"start", start},
                        {"stop", stop}});
    }
    all.push_back(std::move(tokens));
  }
  return all;
}

StatusOr<json> OpenAiEmbeddings(const Call& c) {
  const ModelRegistry& registry = c.server.registry();
  const json& body = c.body;
  if (!body.is_object() || !body.contains("input"))
    return InvalidArgument("expected {\"input\": ..., \"model\": ...}");
  // The default model unless the body names another of several served.
  std::shared_ptr<ServedModel> named;
  if (body.contains("model") && body["model"].is_string() && registry.served_models() > 1) {
    ASSIGN_OR_RETURN(named, registry.Find(body["model"].get<std::string>()));
  }
  ServedModel& m = named ? *named : c.model;
  bool batch = false;
  ASSIGN_OR_RETURN(auto texts, TextList(body["input"], "input", &batch));
  std::vector<TextInput> inputs;
  for (auto& t : texts) inputs.push_back({std::move(t), std::nullopt});
  ASSIGN_OR_RETURN(InferResult r, RunTexts(c, m, inputs, false));
  ASSIGN_OR_RETURN(auto rows, Embeddings(r, false));
  json data = json::array();
  for (size_t i = 0; i < rows.size(); ++i)
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", Floats(rows[i])}});
  const int tokens = r.cu_seqlens.back();
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", m.name()},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

json Info(HttpServer& s, ServedModel& m) {
  const SchedulerOptions& so = m.scheduler().options();
  const char* type =
      m.config().head == HeadKind::kSequenceClassification ? "classifier" : "embedding";
  json model_type = {{type, {{"id2label", json::object()}}}};
  for (size_t i = 0; i < m.config().labels.size(); ++i)
    model_type[type]["id2label"][std::to_string(i)] = m.config().labels[i];
  if (std::string(type) == "embedding")
    model_type = {{"embedding", {{"pooling", PoolingName(m.config().pooling_modes.front())}}}};
  return json{{"model_id", m.name()},
              {"model_sha", nullptr},
              {"model_dtype", m.precision()},
              {"model_type", model_type},
              {"head", HeadKindName(m.config().head)},
              {"device", m.placement()},
              {"max_concurrent_requests", so.max_queue_size},
              {"max_input_length", m.max_input_length()},
              {"max_batch_tokens", so.max_batch_tokens},
              {"max_batch_requests", so.max_batch_size},
              {"max_client_batch_size", so.client_batch_limit()},
              {"max_payload_bytes", s.options().max_payload_bytes},
              {"version", BERTRT_VERSION}};
}

}  // namespace

void HttpServer::AddTeiRoutes() {
  using Request = HttpRequest;
  using Response = HttpResponse;
  auto post = [this](const std::string& path, auto handler) {
    Post(path, path, [this, path, handler](const Request& req, Response& res) {
      InFlightGuard in_flight(metrics_);
      auto m = registry_.Default();
      auto body = ParseBody(req);
      StatusOr<json> out = !m.ok()     ? StatusOr<json>(m.status())
                           : body.ok() ? handler(Call{*this, **m, *body, req})
                                       : StatusOr<json>(body.status());
      if (out.ok())
        SendJson(res, 200, *out);
      else
        SendError(res, out.status());
      metrics_.CountRequest(m.ok() ? (*m)->name() : "", path, out.ok());
    });
  };
  post("/embed", Embed);
  post("/predict", Predict);
  post("/rerank", Rerank);
  post("/tokenize", [](const Call& c) { return Tokenize(c.model, c.body); });
  post("/v1/embeddings", OpenAiEmbeddings);
  Get("/info", "/info", [this](const Request&, Response& res) {
    auto m = registry_.Default();
    if (!m.ok()) return SendError(res, m.status());
    SendJson(res, 200, Info(*this, **m));
  });
}

}  // namespace bertrt::server

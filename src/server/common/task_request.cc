#include "server/common/task_request.h"

#include <algorithm>

namespace bertrt::server {
using serving::ServedModel;
using nlohmann::json;

const char* PipelineTask(const ModelConfig& config) {
  switch (config.head) {
    case HeadKind::kTokenClassification:
      return "token-classification";
    case HeadKind::kQuestionAnswering:
      return "question-answering";
    default:
      return "";
  }
}

namespace {

// parameters[name], or nullptr when absent or null (huggingface_hub sends nulls).
const json* Param(const json& parameters, const char* name) {
  auto it = parameters.find(name);
  return it == parameters.end() || it->is_null() ? nullptr : &*it;
}

Status ReadInt(const json& parameters, const char* name, int lowest, int& out) {
  const json* v = Param(parameters, name);
  if (!v) return Status::Ok();
  if (!v->is_number_integer() || v->get<int64_t>() < lowest || v->get<int64_t>() > (1 << 30))
    return InvalidArgument(std::string("parameter \"") + name +
                           "\" must be an integer of at least " + std::to_string(lowest));
  out = static_cast<int>(v->get<int64_t>());
  return Status::Ok();
}

Status ReadBool(const json& parameters, const char* name, bool& out) {
  const json* v = Param(parameters, name);
  if (!v) return Status::Ok();
  if (!v->is_boolean())
    return InvalidArgument(std::string("parameter \"") + name + "\" must be true or false");
  out = v->get<bool>();
  return Status::Ok();
}

StatusOr<serving::TokenClassificationOptions> TokenParameters(const json& p) {
  serving::TokenClassificationOptions o;
  if (const json* a = Param(p, "aggregation_strategy")) {
    if (!a->is_string())
      return InvalidArgument("parameter \"aggregation_strategy\" must be a string");
    ASSIGN_OR_RETURN(o.aggregation, serving::ParseAggregation(a->get<std::string>()));
  }
  if (const json* labels = Param(p, "ignore_labels")) {
    std::vector<std::string> ignore;
    if (!labels->is_array())
      return InvalidArgument("parameter \"ignore_labels\" must be a list of label names");
    for (const json& l : *labels) {
      if (!l.is_string())
        return InvalidArgument("parameter \"ignore_labels\" must be a list of label names");
      ignore.push_back(l.get<std::string>());
    }
    o.ignore_labels = std::move(ignore);
  }
  RETURN_IF_ERROR(ReadInt(p, "stride", 0, o.stride));
  return o;
}

StatusOr<serving::QuestionAnsweringOptions> AnswerParameters(const json& p) {
  serving::QuestionAnsweringOptions o;
  RETURN_IF_ERROR(ReadInt(p, "top_k", 1, o.top_k));
  RETURN_IF_ERROR(ReadInt(p, "max_answer_len", 1, o.max_answer_len));
  RETURN_IF_ERROR(ReadInt(p, "max_seq_len", 1, o.max_seq_len));
  RETURN_IF_ERROR(ReadInt(p, "doc_stride", 0, o.doc_stride));
  // Read for the check alone: with a fast tokenizer (all bertrt has) the
  // pipeline does not cut the question either.
  int max_question_len = 0;
  RETURN_IF_ERROR(ReadInt(p, "max_question_len", 1, max_question_len));
  RETURN_IF_ERROR(ReadBool(p, "handle_impossible_answer", o.handle_impossible_answer));
  RETURN_IF_ERROR(ReadBool(p, "align_to_words", o.align_to_words));
  return o;
}

StatusOr<std::string> Text(const json& v, const std::string& what) {
  if (!v.is_string()) return InvalidArgument(what + " must be a string");
  return v.get<std::string>();
}

}  // namespace

StatusOr<TaskRequest> TaskRequest::Parse(const ServedModel& model, const json& body,
                                         size_t max_sequences, const json& defaults) {
  const std::string task = PipelineTask(model.config());
  if (task.empty())
    return FailedPrecondition(std::string("this model's head (") +
                              HeadKindName(model.config().head) +
                              ") answers no token-classification or question-answering request");
  if (!body.is_object()) return InvalidArgument("the request must be a JSON object");
  json parameters = defaults;
  if (auto p = body.find("parameters"); p != body.end() && !p->is_null()) {
    if (!p->is_object()) return InvalidArgument("\"parameters\" must be an object");
    parameters.update(*p);
  }
  const bool ner = task == "token-classification";
  // The inputs: "inputs", or run's own keys.
  json inputs;
  if (auto in = body.find("inputs"); in != body.end()) {
    inputs = *in;
  } else if (ner && body.contains("text")) {
    inputs = body["text"];
  } else if (!ner && body.contains("question")) {
    inputs = json{{"question", body["question"]}, {"context", body.value("context", json())}};
  } else {
    return InvalidArgument(ner ? "missing \"inputs\": the text to classify (a string, or a list)"
                               : "missing \"inputs\": {\"question\": ..., \"context\": ...} (or a "
                                 "list of them)");
  }
  TaskRequest out;
  out.list_ = inputs.is_array();
  if (out.list_ && inputs.empty()) return InvalidArgument("\"inputs\" is an empty list");
  const json items = out.list_ ? inputs : json::array({inputs});
  serving::TokenClassificationOptions token_options;
  serving::QuestionAnsweringOptions answer_options;
  if (ner) {
    ASSIGN_OR_RETURN(token_options, TokenParameters(parameters));
  } else {
    ASSIGN_OR_RETURN(answer_options, AnswerParameters(parameters));
  }
  size_t sequences = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string where =
        out.list_ ? "\"inputs\" item " + std::to_string(i) : std::string("\"inputs\"");
    // What the inputs before left of the request's windows.
    if (max_sequences > 0 && sequences >= max_sequences)
      return ResourceExhausted("the inputs need more than the " + std::to_string(max_sequences) +
                               " windows a request may run: send fewer per request");
    const size_t max_windows = max_sequences > 0 ? max_sequences - sequences : 0;
    auto failed = [&](const Status& s) { return Status(s.code(), where + ": " + s.message()); };
    if (ner) {
      ASSIGN_OR_RETURN(std::string text, Text(items[i], where));
      auto prepared =
          serving::PrepareTokenClassification(model, std::move(text), token_options, max_windows);
      if (!prepared.ok()) return failed(prepared.status());
      sequences += serving::WindowCount(*prepared);
      out.tasks_.emplace_back(std::move(*prepared));
    } else {
      const json& item = items[i];
      if (!item.is_object() || !item.contains("question") || !item.contains("context"))
        return InvalidArgument(where + " must be {\"question\": ..., \"context\": ...}");
      ASSIGN_OR_RETURN(std::string question, Text(item["question"], where + " question"));
      ASSIGN_OR_RETURN(std::string context, Text(item["context"], where + " context"));
      auto prepared = serving::PrepareQuestionAnswering(model, question, std::move(context),
                                                        answer_options, max_windows);
      if (!prepared.ok()) return failed(prepared.status());
      sequences += serving::WindowCount(*prepared);
      out.tasks_.emplace_back(std::move(*prepared));
    }
  }
  return out;
}

void TaskRequest::AppendTasks(std::vector<const serving::Task*>& out) const {
  for (const serving::Task& task : tasks_) out.push_back(&task);
}

json TaskRequest::Answer(const std::vector<serving::TaskAnswer>& answers, size_t first) const {
  json out = json::array();
  for (size_t i = first; i < first + tasks_.size(); ++i) {
    if (const auto* entities = std::get_if<std::vector<serving::Entity>>(&answers[i])) {
      json list = json::array();
      for (const serving::Entity& e : *entities) {
        // HF's keys: "entity" and "index" by token, "entity_group" once grouped.
        const bool by_token = e.index >= 0;
        json j;
        j[by_token ? "entity" : "entity_group"] = e.label;
        j["score"] = e.score;
        if (by_token) j["index"] = e.index;
        j["word"] = e.word;
        j["start"] = e.start;
        j["end"] = e.end;
        list.push_back(std::move(j));
      }
      out.push_back(std::move(list));
      continue;
    }
    json found = json::array();
    for (const serving::Answer& a : std::get<std::vector<serving::Answer>>(answers[i]))
      found.push_back(
          {{"score", a.score}, {"start", a.start}, {"end", a.end}, {"answer", a.answer}});
    // As the pipeline: one answer alone, not in a list.
    out.push_back(found.size() == 1 ? found[0] : found);
  }
  return list_ ? out : out[0];
}

}  // namespace bertrt::server

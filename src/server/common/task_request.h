// Token classification and question answering requests as the HF Inference
// API takes them (huggingface_hub's token_classification and
// question_answering post them) and as `bertrt run --task` reads its lines:
// the JSON in, the serving core's task (src/serving) prepared on the served
// model, and its answer as HF pipelines write it.
//   token classification: {"inputs": "text" | ["text", ...], "parameters":
//     {"aggregation_strategy", "ignore_labels", "stride"}}; `run` also
//     takes {"text": ...}
//   question answering: {"inputs": {"question", "context"} | [{...}, ...],
//     "parameters": {"top_k", "max_answer_len", "doc_stride", "max_seq_len",
//     "max_question_len", "handle_impossible_answer", "align_to_words"}};
//     `run` also takes {"question", "context"}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "serving/model_registry.h"
#include "serving/infer.h"

namespace bertrt::server {

// The task a model's head answers: "token-classification",
// "question-answering", or "" for the heads that have none.
const char* PipelineTask(const ModelConfig& config);

class TaskRequest {
 public:
  // `body` for `model` (whose head PipelineTask names); parameters the body
  // leaves out come from `defaults` (run's --parameters). InvalidArgument
  // says which field is wrong and how; ResourceExhausted, that the inputs
  // need more than `max_sequences` windows (0: no limit).
  static StatusOr<TaskRequest> Parse(const serving::ServedModel& model, const nlohmann::json& body,
                                     size_t max_sequences,
                                     const nlohmann::json& defaults = nlohmann::json::object());
  // Appends its tasks, one per input in order, for serving::Infer::RunTasks.
  void AppendTasks(std::vector<const serving::Task*>& out) const;
  size_t tasks() const { return tasks_.size(); }
  // The answer, given RunTasks' answers of which [first, first + tasks())
  // are this request's: entities (a list per text), or answers (one object,
  // or a list when top_k > 1 found more), a list of those for a list input.
  nlohmann::json Answer(const std::vector<serving::TaskAnswer>& answers, size_t first = 0) const;

 private:
  std::vector<serving::Task> tasks_;
  bool list_ = false;  // the inputs came as a list
};

}  // namespace bertrt::server

// Reads a TensorFlow 1 checkpoint (tf.compat.v1.train.Saver's tensor bundle:
// <prefix>.index, an SSTable of BundleEntry protos, and the data shards
// <prefix>.data-0000i-of-0000N) without TensorFlow, as Google's BERT scripts
// leave it after fine-tuning (run_classifier.py, run_squad.py, NER scripts).
// Variables get transformers' names, as transformers' own TF-to-PyTorch
// conversion names them (kernels transposed from [in, out] to [out, in]), so
// the BERT family's weight mapping binds them like any other checkpoint.
// Training-only variables (Adam slots, global_step) are listed, not read.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bertrt/status.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"

namespace bertrt::checkpoint {

// The checkpoint in `dir`: the prefix (without ".index") that the
// `checkpoint` file names, or the only *.index there. Empty when there is none.
StatusOr<std::string> FindTfCheckpoint(const std::string& dir);

struct TfCheckpoint {
  // Training-only variables come back with empty data (their names only, for
  // the skipped-tensors notice).
  std::vector<CheckpointTensor> tensors;
  std::vector<std::string> files;  // the .index and the data shards read
  int renamed = 0;                 // variables given transformers' names
  int transposed = 0;              // of which kernels transposed
};

// Reads the checkpoint at `prefix`.
StatusOr<TfCheckpoint> ReadTfCheckpoint(const std::string& prefix);

// The key/value pairs of an SSTable held in memory, in order, every block's
// CRC checked (used by ReadTfCheckpoint and the fuzz target).
StatusOr<std::vector<std::pair<std::string, std::string>>> ReadSstable(std::string_view bytes,
                                                                       const std::string& where);

// transformers' name for Google's BERT variable `name` ("bert/encoder/layer_0/
// attention/self/query/kernel" -> "bert.encoder.layer.0.attention.self.query.
// weight"); `transpose` says whether the tensor is a kernel stored [in, out].
std::string HfNameOfTfVariable(const std::string& name, bool* transpose);

// config.json's content for a Google BERT folder: bert_config.json's sizes,
// model_type "bert", the head from the checkpoint's variables (cls/squad/...:
// question answering; output_weights: sequence classification, with as many
// labels as it has rows, named by labels.txt beside it when there is one),
// and hidden_act "gelu" read as what Google's modeling.py computes, the tanh
// form (gelu_new), with a notice. A config.json written beside the checkpoint
// takes precedence over all of this (a token-classification head, for one).
StatusOr<nlohmann::json> HfConfigFromBertConfig(const nlohmann::json& bert_config,
                                                const std::string& path, const Checkpoint& ckpt,
                                                const NoticeFn& notice);

// Whether a TensorFlow variable exists only for training.
bool IsTfTrainingVariable(const std::string& name);

}  // namespace bertrt::checkpoint

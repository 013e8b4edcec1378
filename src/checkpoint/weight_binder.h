// Finds a checkpoint's tensors by name for a family's weight mapping
// (src/families), checking each shape and remembering what it used, so that
// what is left over can be reported.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "bertrt/status.h"
#include "bertrt/tensor.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"

namespace bertrt::checkpoint {

// An fp32 tensor for `ref`: the mapped bytes themselves when they are aligned
// F32, otherwise a converted copy.
StatusOr<Tensor> ToFloat32(const CheckpointTensor& ref);

class WeightBinder {
 public:
  // `prefix`: the encoder's ("roberta." in a RobertaForSequenceClassification
  // checkpoint, "" in a bare RobertaModel, "model.roberta." in some exports).
  // Task heads sit beside the encoder: their prefix is `prefix` without its
  // trailing `encoder_name` + "." ("roberta.x" -> "classifier.x").
  WeightBinder(const Checkpoint& ckpt, std::string prefix, const std::string& encoder_name = "");

  // `names` are alternative spellings under the encoder prefix (or the head
  // prefix when `head` is set). A missing optional tensor leaves `out` empty.
  Status Get(const std::vector<std::string>& names, const std::vector<int64_t>& shape,
             Tensor* out, bool required = true, bool head = false, const char* why = nullptr);
  // Biases (of Linear and LayerNorm) the checkpoint leaves out read as zeros
  // from now on, instead of being an error: families whose configs turn
  // biases off (ModernBERT's attention_bias, mlp_bias, norm_bias...).
  void AbsentBiasesReadZeros() { absent_biases_read_zeros_ = true; }

  // base.weight [out, in] and base.bias [out]; an absent optional layer
  // leaves both empty.
  Status Linear(const std::string& base, int64_t out_features, int64_t in_features, Tensor* w,
                Tensor* b, bool required = true, bool head = false, const char* why = nullptr);
  // base.weight/bias, or the gamma/beta of old TF-converted checkpoints.
  Status LayerNorm(const std::string& base, int64_t hidden, Tensor* gamma, Tensor* beta,
                   bool head = false);

  // Whether the checkpoint has `name` under the encoder prefix.
  bool Has(const std::string& name) const;
  // The three names present closest to `name` (for "did you mean" messages).
  std::string Closest(const std::string& name) const;
  const std::set<std::string>& used() const { return used_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const Checkpoint& ckpt_;
  std::string prefix_, head_prefix_;
  std::set<std::string> used_;
  bool absent_biases_read_zeros_ = false;

  // A bias under one of `names`, or zeros where it is absent and
  // AbsentBiasesReadZeros was called.
  Status Bias(const std::vector<std::string>& names, int64_t size, Tensor* out, bool head);
};

// "a, b, c, ..." of the first `max` names.
std::string FewNames(const std::vector<std::string>& names, size_t max);

// Tells `notice` which tensors of `ckpt` went unused: training-only ones
// (optimizer slots, pretraining heads) in one summary, the rest apart.
void ReportUnused(const Checkpoint& ckpt, const std::set<std::string>& used,
                  const NoticeFn& notice);

}  // namespace bertrt::checkpoint

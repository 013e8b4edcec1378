#include "checkpoint/weight_binder.h"

#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "model/model_check.h"

namespace bertrt::checkpoint {

StatusOr<Tensor> ToFloat32(const CheckpointTensor& ref) {
  const Tensor& src = ref.data;
  const auto* bytes = static_cast<const uint8_t*>(src.raw());
  const size_t n = static_cast<size_t>(src.numel());
  const DType dtype = src.dtype();
  if (dtype == DType::kF32 && reinterpret_cast<uintptr_t>(bytes) % alignof(float) == 0)
    return src;
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 &&
      dtype != DType::kF64)
    return InvalidArgument(ref.name + " in " + ref.file + " has dtype " +
                           DTypeName(dtype) + "; weights must be F32, F16, BF16 or F64");
  Tensor out = Tensor::ZerosF32(src.shape());
  float* dst = out.mutable_f32();
  if (dtype == DType::kF16 || dtype == DType::kBF16) {
    WidenToFloat(dtype, bytes, n, dst);
  } else if (dtype == DType::kF32) {
    std::memcpy(dst, bytes, 4 * n);  // unaligned F32
  } else {
    for (size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, bytes + 8 * i, 8);  // the file gives no alignment guarantee
      dst[i] = static_cast<float>(d);
    }
  }
  return out;
}

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

bool StartsWithOrContains(const std::string& name, const std::string& part) {
  return name.rfind(part, 0) == 0 || name.find("." + part) != std::string::npos;
}

// Names that only matter for training or for heads bertrt does not run.
bool IsTrainingOnly(const std::string& name) {
  static const char* const kMarkers[] = {
      "adam_m", "adam_v", "_accumulator", "global_step", "position_ids", "Momentum",
      "early_stopping", "bad_steps", "good_steps", "loss_scale"};
  for (const char* m : kMarkers)
    if (name.find(m) != std::string::npos) return true;
  // Masked-LM / NSP heads of pretraining checkpoints, with or without a
  // prefix: BERT's cls., RoBERTa's lm_head., DistilBERT's vocab_*.
  for (const char* head : {"cls.", "lm_head.", "vocab_transform.", "vocab_layer_norm.",
                           "vocab_projector."})
    if (StartsWithOrContains(name, head)) return true;
  return false;
}

}  // namespace

std::string FewNames(const std::vector<std::string>& names, size_t max) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max) s += ", ...";
  return s;
}

WeightBinder::WeightBinder(const Checkpoint& ckpt, std::string prefix,
                           const std::string& encoder_name)
    : ckpt_(ckpt), prefix_(std::move(prefix)), head_prefix_(prefix_) {
  const std::string component = encoder_name.empty() ? "" : encoder_name + ".";
  if (!component.empty() && head_prefix_.size() >= component.size() &&
      head_prefix_.compare(head_prefix_.size() - component.size(), component.size(),
                           component) == 0)
    head_prefix_.resize(head_prefix_.size() - component.size());
}

Status WeightBinder::Get(const std::vector<std::string>& names, const std::vector<int64_t>& shape,
                         Tensor* out, bool required, bool head, const char* why) {
  std::vector<std::string> tried;
  for (const std::string& n : names) {
    const std::string full = (head ? head_prefix_ : prefix_) + n;
    tried.push_back(full);
    const CheckpointTensor* ref = ckpt_.Find(full);
    if (!ref) continue;
    if (ref->data.shape() != shape)
      return InvalidArgument(full + ": expected " + ShapeToString(shape) + ", found " +
                             ShapeToString(ref->data.shape()) + " in " + ref->file);
    used_.insert(full);
    ASSIGN_OR_RETURN(*out, ToFloat32(*ref));
    return CheckFinite(*out, full + " in " + ref->file);
  }
  if (!required) return Status::Ok();
  return NotFound("missing tensor " + tried[0] + " " + ShapeToString(shape) +
                  (why ? std::string(" (") + why + ")" : "") + "; tried " + FewNames(tried, 8) +
                  "; closest names present: " + Closest(tried[0]));
}

Status WeightBinder::Linear(const std::string& base, int64_t out_features, int64_t in_features,
                            Tensor* w, Tensor* b, bool required, bool head, const char* why) {
  RETURN_IF_ERROR(Get({base + ".weight"}, {out_features, in_features}, w, required, head, why));
  if (w->empty()) return Status::Ok();  // an absent optional layer: no bias wanted either
  return Bias({base + ".bias"}, out_features, b, head);
}

Status WeightBinder::LayerNorm(const std::string& base, int64_t hidden, Tensor* gamma,
                               Tensor* beta, bool head) {
  RETURN_IF_ERROR(Get({base + ".weight", base + ".gamma"}, {hidden}, gamma, true, head));
  return Bias({base + ".bias", base + ".beta"}, hidden, beta, head);
}

Status WeightBinder::Bias(const std::vector<std::string>& names, int64_t size, Tensor* out,
                          bool head) {
  RETURN_IF_ERROR(Get(names, {size}, out, !absent_biases_read_zeros_, head));
  if (out->empty()) *out = Tensor::ZerosF32({size});
  return Status::Ok();
}

bool WeightBinder::Has(const std::string& name) const {
  return ckpt_.Find(prefix_ + name) != nullptr;
}

std::string WeightBinder::Closest(const std::string& name) const {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& [n, ref] : ckpt_.tensors()) scored.emplace_back(EditDistance(name, n), n);
  const size_t k = std::min<size_t>(3, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + k, scored.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < k; ++i) names.push_back(scored[i].second);
  return names.empty() ? "(the checkpoint is empty)" : FewNames(names, k);
}

void ReportUnused(const Checkpoint& ckpt, const std::set<std::string>& used,
                  const NoticeFn& notice) {
  if (!notice) return;
  std::vector<std::string> training, unexpected;
  for (const auto& [name, ref] : ckpt.tensors()) {
    if (used.count(name)) continue;
    (IsTrainingOnly(name) ? training : unexpected).push_back(name);
  }
  if (!training.empty())
    notice("skipped " + std::to_string(training.size()) +
           " training-only or unused-head tensors: " + FewNames(training, 5));
  if (!unexpected.empty())
    notice("ignored " + std::to_string(unexpected.size()) +
           " unexpected tensors: " + FewNames(unexpected, 5));
}

}  // namespace bertrt::checkpoint

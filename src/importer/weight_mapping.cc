#include "importer/weight_mapping.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "core/half.h"
#include "runtime/model_check.h"

namespace bertrt::importer {

StatusOr<Tensor> ToFloat32(const Checkpoint::Ref& ref) {
  const Tensor src = ref.file->View(*ref.entry);
  const auto* bytes = static_cast<const uint8_t*>(src.raw());
  const size_t n = static_cast<size_t>(src.numel());
  const DType dtype = src.dtype();
  if (dtype == DType::kF32 && reinterpret_cast<uintptr_t>(bytes) % alignof(float) == 0)
    return src;
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 &&
      dtype != DType::kF64)
    return InvalidArgument(ref.entry->name + " in " + Checkpoint::FileName(ref) + " has dtype " +
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

// Names that only matter for training or for heads bertrt does not run.
bool IsTrainingOnly(const std::string& name) {
  static const char* const kMarkers[] = {
      "adam_m", "adam_v", "_accumulator", "global_step", "position_ids", "Momentum",
      "early_stopping", "bad_steps", "good_steps", "loss_scale"};
  for (const char* m : kMarkers)
    if (name.find(m) != std::string::npos) return true;
  // MLM / NSP heads of pretraining checkpoints, with or without a prefix.
  return name.rfind("cls.", 0) == 0 || name.find(".cls.") != std::string::npos;
}

std::string FewNames(const std::vector<std::string>& names, size_t max) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max) s += ", ...";
  return s;
}

class Binder {
 public:
  Binder(const Checkpoint& ckpt, std::string prefix) : ckpt_(ckpt), prefix_(std::move(prefix)) {
    // Task heads sit beside the encoder: "bert.x" -> "classifier.x".
    head_prefix_ = prefix_;
    const std::string bert = "bert.";
    if (head_prefix_.size() >= bert.size() &&
        head_prefix_.compare(head_prefix_.size() - bert.size(), bert.size(), bert) == 0)
      head_prefix_.resize(head_prefix_.size() - bert.size());
  }

  // `names` are alternative spellings under the encoder prefix (or the head
  // prefix when `head` is set). A missing optional tensor leaves `out` empty.
  Status Get(const std::vector<std::string>& names, const std::vector<int64_t>& shape,
             Tensor* out, bool required = true, bool head = false, const char* why = nullptr) {
    std::vector<std::string> tried;
    for (const std::string& n : names) {
      const std::string full = (head ? head_prefix_ : prefix_) + n;
      tried.push_back(full);
      const Checkpoint::Ref* ref = ckpt_.Find(full);
      if (!ref) continue;
      if (ref->entry->shape != shape)
        return InvalidArgument(full + ": expected " + ShapeToString(shape) + ", found " +
                               ShapeToString(ref->entry->shape) + " in " +
                               Checkpoint::FileName(*ref));
      used_.insert(full);
      ASSIGN_OR_RETURN(*out, ToFloat32(*ref));
      return CheckFinite(*out, full + " in " + Checkpoint::FileName(*ref));
    }
    if (!required) return Status::Ok();
    return NotFound("missing tensor " + tried[0] + " " + ShapeToString(shape) +
                    (why ? std::string(" (") + why + ")" : "") + "; tried " +
                    FewNames(tried, 8) + "; closest names present: " + Closest(tried[0]));
  }

  Status Linear(const std::string& base, int64_t out_features, int64_t in_features, Tensor* w,
                Tensor* b, bool required = true, bool head = false, const char* why = nullptr) {
    RETURN_IF_ERROR(Get({base + ".weight"}, {out_features, in_features}, w, required, head, why));
    if (w->empty()) return Status::Ok();  // an absent optional layer: no bias wanted either
    return Get({base + ".bias"}, {out_features}, b, true, head);
  }

  Status LayerNorm(const std::string& base, int64_t hidden, Tensor* gamma, Tensor* beta) {
    // Old TF-converted checkpoints call these gamma and beta.
    RETURN_IF_ERROR(Get({base + ".weight", base + ".gamma"}, {hidden}, gamma));
    return Get({base + ".bias", base + ".beta"}, {hidden}, beta);
  }

  std::string Closest(const std::string& name) const {
    std::vector<std::pair<size_t, std::string>> scored;
    for (const auto& [n, ref] : ckpt_.tensors()) scored.emplace_back(EditDistance(name, n), n);
    const size_t k = std::min<size_t>(3, scored.size());
    std::partial_sort(scored.begin(), scored.begin() + k, scored.end());
    std::vector<std::string> names;
    for (size_t i = 0; i < k; ++i) names.push_back(scored[i].second);
    return names.empty() ? "(the checkpoint is empty)" : FewNames(names, k);
  }

  const std::set<std::string>& used() const { return used_; }

 private:
  const Checkpoint& ckpt_;
  std::string prefix_, head_prefix_;
  std::set<std::string> used_;
};

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

}  // namespace

Status BindWeights(const Checkpoint& ckpt, const ModelConfig& c, const NoticeFn& notice,
                   ModelWeights* w) {
  static const char* const kPrefixes[] = {"bert.", "", "model.", "model.bert."};
  const std::string anchor = "embeddings.word_embeddings.weight";
  const char* prefix = nullptr;
  for (const char* p : kPrefixes) {
    if (ckpt.Find(p + anchor)) {
      prefix = p;
      break;
    }
  }
  if (!prefix) {
    Binder probe(ckpt, "");
    std::vector<std::string> tried;
    for (const char* p : kPrefixes) tried.push_back(p + anchor);
    return NotFound("missing tensor " + anchor + "; tried " + FewNames(tried, 8) +
                    "; closest names present: " + probe.Closest(tried[0]));
  }

  Binder b(ckpt, prefix);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  RETURN_IF_ERROR(b.Get({anchor}, {c.vocab_size, H}, &w->word_embeddings));
  RETURN_IF_ERROR(b.Get({"embeddings.position_embeddings.weight"},
                        {c.max_position_embeddings, H}, &w->position_embeddings));
  RETURN_IF_ERROR(b.Get({"embeddings.token_type_embeddings.weight"}, {c.type_vocab_size, H},
                        &w->token_type_embeddings));
  RETURN_IF_ERROR(b.LayerNorm("embeddings.LayerNorm", H, &w->emb_ln_gamma, &w->emb_ln_beta));

  w->layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    RETURN_IF_ERROR(b.Linear(p + "attention.self.query", H, H, &l.query_w, &l.query_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.self.key", H, H, &l.key_w, &l.key_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.self.value", H, H, &l.value_w, &l.value_b));
    RETURN_IF_ERROR(b.Linear(p + "attention.output.dense", H, H, &l.attn_out_w, &l.attn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + "attention.output.LayerNorm", H, &l.attn_ln_gamma,
                                &l.attn_ln_beta));
    RETURN_IF_ERROR(b.Linear(p + "intermediate.dense", I, H, &l.ffn_in_w, &l.ffn_in_b));
    RETURN_IF_ERROR(b.Linear(p + "output.dense", H, I, &l.ffn_out_w, &l.ffn_out_b));
    RETURN_IF_ERROR(b.LayerNorm(p + "output.LayerNorm", H, &l.ffn_ln_gamma, &l.ffn_ln_beta));
  }
  const std::string extra_layer = std::string(prefix) + "encoder.layer." +
                                  std::to_string(c.num_layers) + ".attention.self.query.weight";
  if (ckpt.Find(extra_layer))
    return InvalidArgument("checkpoint has " + extra_layer + " but config.json says " +
                           "num_hidden_layers = " + std::to_string(c.num_layers));

  // Sequence classification feeds the classifier through the pooler, so a
  // checkpoint without it (a common converter bug) cannot be served.
  const bool need_pooler = c.head == HeadKind::kSequenceClassification;
  RETURN_IF_ERROR(b.Linear("pooler.dense", H, H, &w->pooler_w, &w->pooler_b, need_pooler, false,
                           "sequence classification needs the pooler; was it dropped when "
                           "the checkpoint was converted?"));
  if (c.head == HeadKind::kSequenceClassification || c.head == HeadKind::kTokenClassification)
    RETURN_IF_ERROR(b.Linear("classifier", c.num_labels, H, &w->classifier_w, &w->classifier_b,
                             true, true));
  else if (c.head == HeadKind::kQuestionAnswering)
    RETURN_IF_ERROR(b.Linear("qa_outputs", 2, H, &w->classifier_w, &w->classifier_b, true,
                             true));
  ReportUnused(ckpt, b.used(), notice);
  return Status::Ok();
}

Status BindDenseWeights(const std::string& dir, const DenseSpec& spec, const NoticeFn& notice,
                        DenseWeights* w) {
  ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir));
  Binder b(ckpt, "");
  RETURN_IF_ERROR(b.Get({"linear.weight"}, {spec.out_features, spec.in_features}, &w->w));
  if (spec.bias) RETURN_IF_ERROR(b.Get({"linear.bias"}, {spec.out_features}, &w->b));
  ReportUnused(ckpt, b.used(), notice);
  return Status::Ok();
}

}  // namespace bertrt::importer

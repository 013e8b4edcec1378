#include "importer/weight_mapping.h"

#include <cstring>
#include <vector>

#include "core/half.h"
#include "families/family.h"
#include "checkpoint/weight_binder.h"
#include "model/model_check.h"

namespace bertrt::importer {
using checkpoint::Checkpoint;
using checkpoint::FewNames;
using checkpoint::ReportUnused;
using checkpoint::WeightBinder;

Status BindWeights(const Checkpoint& ckpt, const ModelConfig& c, const NoticeFn& notice,
                   ModelWeights* w) {
  const families::Family* family = families::FindFamily(c.model_type);
  if (!family) return Unimplemented("no model family serves model_type " + c.model_type);
  // Where the encoder sits: under its component name in task checkpoints
  // ("roberta.embeddings..."), at the root in base ones, under "model." in
  // some exports.
  const std::string name = family->encoder_name;
  const std::string prefixes[] = {name + ".", "", "model.", "model." + name + "."};
  const std::string anchor = family->word_embeddings;
  for (const std::string& p : prefixes) {
    if (!ckpt.Find(p + anchor)) continue;
    WeightBinder b(ckpt, p, name);
    RETURN_IF_ERROR(family->bind_weights(b, c, w));
    ReportUnused(ckpt, b.used(), notice);
    return Status::Ok();
  }
  std::vector<std::string> tried;
  for (const std::string& p : prefixes) tried.push_back(p + anchor);
  return NotFound("missing tensor " + anchor + " (of a " + family->name + " model); tried " +
                  FewNames(tried, 8) + "; closest names present: " +
                  WeightBinder(ckpt, "").Closest(tried[0]));
}

Status BindDenseWeights(const std::string& dir, const DenseSpec& spec, const NoticeFn& notice,
                        DenseWeights* w) {
  ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir));
  WeightBinder b(ckpt, "");
  RETURN_IF_ERROR(b.Get({"linear.weight"}, {spec.out_features, spec.in_features}, &w->w));
  if (spec.bias) RETURN_IF_ERROR(b.Get({"linear.bias"}, {spec.out_features}, &w->b));
  ReportUnused(ckpt, b.used(), notice);
  return Status::Ok();
}

}  // namespace bertrt::importer

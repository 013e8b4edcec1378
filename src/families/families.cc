#include <algorithm>

#include "families/family.h"

namespace bertrt::families {

extern const Family kBert, kRoberta, kDistilBert, kMpnet, kModernBert;

const std::vector<const Family*>& AllFamilies() {
  static const std::vector<const Family*> kAll = {&kBert, &kRoberta, &kDistilBert, &kMpnet,
                                                  &kModernBert};
  return kAll;
}

const Family* FindFamily(const std::string& model_type) {
  for (const Family* f : AllFamilies())
    if (std::find(f->model_types.begin(), f->model_types.end(), model_type) !=
        f->model_types.end())
      return f;
  return nullptr;
}

std::string SupportedModelTypes() {
  std::string s;
  for (const Family* f : AllFamilies())
    for (const std::string& t : f->model_types) s += (s.empty() ? "\"" : ", \"") + t + "\"";
  return s;
}

}  // namespace bertrt::families

// Helpers shared by the importer tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bertrt/importer.h"

namespace bertrt::importer_test {

inline std::string ModelDir(const std::string& name) {
  return std::string(BERTRT_TEST_DATA_DIR) + "/models/" + name;
}

struct Loaded {
  StatusOr<std::shared_ptr<Model>> model;
  std::vector<std::string> notices;
};

inline Loaded Load(const std::string& dir) {
  auto notices = std::make_shared<std::vector<std::string>>();
  ImportOptions options;
  options.on_notice = [notices](const std::string& n) { notices->push_back(n); };
  auto model = LoadHfModel(dir, options);
  return {std::move(model), *notices};
}

}  // namespace bertrt::importer_test

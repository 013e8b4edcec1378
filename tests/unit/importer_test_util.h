// Helpers shared by the importer tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cstring>

#include "bertrt/importer.h"
#include "checkpoint/checkpoint.h"

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

// Every tensor of `source`'s checkpoint (but position_ids buffers, which
// exporters drop) is in `converted`'s with the same shape and dtype and the
// same bytes: the same weights in another format. Returns how many it compared.
inline size_t ExpectSameTensors(const std::string& converted, const std::string& source,
                                const std::string& format) {
  auto got = checkpoint::Checkpoint::Open(ModelDir(converted));
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  auto want = checkpoint::Checkpoint::Open(ModelDir(source));
  EXPECT_TRUE(want.ok()) << want.status().ToString();
  if (!got.ok() || !want.ok()) return 0;
  if (!format.empty()) EXPECT_EQ(got->format(), format);
  size_t compared = 0;
  for (const auto& [name, w] : want->tensors()) {
    if (name.find("position_ids") != std::string::npos) continue;
    const checkpoint::CheckpointTensor* g = got->Find(name);
    EXPECT_NE(g, nullptr) << converted << ": " << name;
    if (!g) continue;
    EXPECT_EQ(g->data.dtype(), w.data.dtype()) << name;
    EXPECT_EQ(g->data.shape(), w.data.shape()) << name;
    if (g->data.shape() == w.data.shape() && g->data.dtype() == w.data.dtype())
      EXPECT_EQ(std::memcmp(g->data.raw(), w.data.raw(), w.data.nbytes()), 0) << name;
    ++compared;
  }
  return compared;
}

}  // namespace bertrt::importer_test

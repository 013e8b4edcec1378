// libFuzzer target: a TensorFlow checkpoint index (an SSTable of BundleEntry
// protos) from arbitrary bytes must come back as a Status or as entries that
// lie inside the input and parse (or fail to parse) as protos.
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/tf_checkpoint.h"
#include "tf_bundle.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A private copy: its exact size lets ASan flag any read past the end.
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto entries = bertrt::checkpoint::ReadSstable(bytes, "fuzz");
  if (!entries.ok()) return 0;
  for (const auto& [key, value] : *entries) {
    bertrt::tf::BundleEntry e;
    if (e.ParseFromString(value)) {
      bool transpose = false;
      (void)bertrt::checkpoint::HfNameOfTfVariable(key, &transpose);
    }
  }
  return 0;
}

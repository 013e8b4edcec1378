// Reader for the safetensors format. The bytes are untrusted: every length and
// offset is checked before use and nothing is read outside the buffer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/status.h"
#include "bertrt/tensor.h"

namespace bertrt {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Parses a whole file held in memory (used by the fuzz target and tests).
  // `owner` keeps `bytes` alive for the tensors handed out.
  static StatusOr<SafetensorsFile> Parse(std::string_view bytes,
                                         std::shared_ptr<const void> owner,
                                         std::string display_name = "<memory>");
  // Reads `path` into memory (ReadRegularFileIntoMemory) and parses it.
  static StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* Find(const std::string& name) const;
  // A view of the tensor's bytes in the file (any dtype).
  Tensor View(const SafetensorsEntry& entry) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::shared_ptr<const void> owner_;
};

}  // namespace bertrt

// What the builder takes from the source directory besides the Model: the
// tokenizer exactly as the directory defines it, and a checksum of the
// weights so a plan can be traced back to the checkpoint it came from.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "bertrt/importer.h"
#include "bertrt/plan.h"
#include "core/crc32c.h"
#include "core/files.h"
#include "importer/hf_config.h"

namespace bertrt {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ModelDirectory(const std::string& dir) {
  ASSIGN_OR_RETURN(auto layout, importer::ReadSentenceTransformersLayout(dir));
  return layout ? layout->transformer_dir : dir;
}

// Continues `crc` over the file's bytes, read a window at a time (read, not
// mapped: a file cut short meanwhile is an error rather than SIGBUS).
StatusOr<uint32_t> CrcFile(const std::string& path, uint32_t crc) {
  ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path));
  const int fd = file.fd;
  std::vector<char> window(size_t{8} << 20);
  for (size_t off = 0; off < file.size;) {
    const ssize_t n =
        pread(fd, window.data(), std::min(window.size(), file.size - off), static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "it shrank while it was read";
      close(fd);
      return DataLoss("error reading " + path + ": " + why);
    }
    crc = Crc32c(window.data(), static_cast<size_t>(n), crc);
    off += static_cast<size_t>(n);
  }
  close(fd);
  return crc;
}

}  // namespace

StatusOr<std::string> TokenizerDirectory(const std::string& model_dir) {
  if (fs::exists(fs::path(model_dir) / "tokenizer.json") ||
      fs::exists(fs::path(model_dir) / "vocab.txt"))
    return model_dir;
  return ModelDirectory(model_dir);
}

StatusOr<TokenizerSource> ReadTokenizerSource(const std::string& model_dir) {
  ASSIGN_OR_RETURN(std::string dir, TokenizerDirectory(model_dir));
  // Loading it first both validates it and gives the settings the
  // directory's config files resolve to.
  ASSIGN_OR_RETURN(auto tokenizer, Tokenizer::FromDirectory(dir));
  TokenizerSource source;
  const fs::path json_path = fs::path(dir) / "tokenizer.json";
  if (fs::exists(json_path)) {
    ASSIGN_OR_RETURN(source.bytes, ReadRegularFile(json_path.string()));
    source.kind = "tokenizer.json";
    return source;
  }
  // vocab.txt as the loader parsed it (one token per id, trailing
  // whitespace trimmed): those lines never hold a '\n'.
  source.kind = "vocab";
  const std::vector<std::string> vocab = tokenizer->Vocabulary();
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab[i].find('\n') != std::string::npos)
      return Internal("vocabulary token " + std::to_string(i) + " holds a newline");
    if (i) source.bytes += '\n';
    source.bytes += vocab[i];
  }
  source.settings = tokenizer->settings();
  return source;
}

StatusOr<std::shared_ptr<Tokenizer>> LoadTokenizerFrom(const std::string& path) {
  if (const std::string plan_path = PlanPath(path); !plan_path.empty()) {
    ASSIGN_OR_RETURN(Plan plan, ReadPlan(plan_path));
    return plan.tokenizer;
  }
  // A weights file (model.onnx, a TensorFlow checkpoint) has its tokenizer
  // in its directory.
  ASSIGN_OR_RETURN(const ModelSource source, ResolveModelSource(path));
  ASSIGN_OR_RETURN(std::string dir, TokenizerDirectory(source.dir));
  return Tokenizer::FromDirectory(dir);
}

StatusOr<std::string> SourceChecksum(const std::vector<std::string>& weights_files) {
  std::vector<std::string> files = weights_files;
  std::sort(files.begin(), files.end());
  uint32_t crc = 0;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(crc, CrcFile(f, crc));
  }
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%08x", crc);
  return "crc32c:" + std::string(hex) + " over " + std::to_string(files.size()) +
         " weights file(s)";
}

}  // namespace bertrt

// Plan files: one self-contained file per model holding everything
// needed to serve it (config, head, labels, tokenizer, weights in bertrt's own
// layout, build metadata, a GEMM tuning-cache slot). The bytes of a plan are
// untrusted: the reader checks every size, offset and checksum before use.
//
// Layout (little-endian; see src/builder/plan_format.h for the exact fields):
//   header (64 B: magic "BERTRTPL", format version, sizes, table offset and
//   count, CRC32C of the table and of the header) | sections, each 64-byte
//   aligned (4096 for large tensors) | section table (name, kind, dtype,
//   shape, offset, length, CRC32C per section).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/devices.h"
#include "bertrt/engine.h"
#include "bertrt/model.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"

namespace bertrt {

// Bumped whenever a reader of the old version could misread a new plan.
inline constexpr uint32_t kPlanFormatVersion = 1;

struct PlanBuildOptions {
  // Precision of the stored GEMM weights, GEMM biases and embedding tables
  // (what the CUDA engine computes in); LayerNorm and classifier stay fp32.
  Precision precision = Precision::kFp32;
  std::string device = "cpu";  // the backend the plan is laid out for: cpu | cuda
  int max_seq_len = 0;         // 0: the model's max_seq_length
  int max_batch_tokens = 0;    // 0: no limit; a hint for engines that reserve memory
  // The GPU the plan was built and tuned on; nullopt when built without one.
  std::optional<GpuInfo> gpu;
  // Its GEMM tuning cache (TimeGemms on that GPU).
  std::vector<GemmChoice> gemm_choices;
};

// What the plan says about itself (its metadata section).
struct PlanInfo {
  uint32_t format_version = 0;
  std::string bertrt_version;   // of the build that wrote it
  std::string created_utc;      // ISO 8601
  std::string source;           // the HF directory it was built from
  std::string source_checksum;  // "crc32c:<hex>" over the source weight files
  std::string source_weights_format;  // "safetensors", "pytorch_model.bin (zip)", ...; empty in older plans
  std::vector<std::string> source_import_notes;  // Model::import_notes of the source; empty in older plans
  std::string precision;        // fp32 | fp16 | bf16 | int8
  std::string device;           // cpu | cuda
  std::string gpu_name;         // empty when not built on a GPU
  int gpu_compute_capability = 0;
  int max_seq_len = 0;
  int max_batch_tokens = 0;
  std::string tokenizer_kind;  // "tokenizer.json" | "vocab"
  size_t gemm_choices = 0;     // entries of the GEMM tuning cache
  // An int8 plan's accuracy report (measured when it was built).
  std::optional<QuantizationReport> quantization;
  uint64_t file_size = 0;
  size_t num_sections = 0;
};

struct Plan {
  std::shared_ptr<Model> model;  // zero-copy views of the bytes read, in the stored dtypes
  std::shared_ptr<Tokenizer> tokenizer;
  PlanInfo info;
};

// Whether `path` is a regular file that starts with the plan magic (cheap: it
// reads 8 bytes). Used to route a MODEL argument to the plan reader.
bool IsPlanFile(const std::string& path);

// `path` itself when it is a plan file; the plan a folder holds when it holds
// one *.plan and no model files (config.json, bert_config.json, modules.json):
// how KServe's storage initializer leaves a plan at /mnt/models. Else "".
std::string PlanPath(const std::string& path);

// Reads `path` into memory (ReadRegularFileIntoMemory), validates it and binds
// the Model to those bytes.
StatusOr<Plan> ReadPlan(const std::string& path);
// The same over bytes in memory (tests, fuzzing); `owner` keeps them alive.
StatusOr<Plan> ReadPlanFromMemory(std::string_view bytes, std::shared_ptr<const void> owner,
                                  const std::string& display_name);

// Only the header, table, metadata and tuning section (validated, their
// checksums included), not the tensors: for `inspect`.
StatusOr<PlanInfo> ReadPlanInfo(const std::string& path);

// How the tokenizer is stored so that it reloads exactly: the source
// tokenizer.json bytes, or the vocab.txt lines (as parsed) plus the settings
// the directory's tokenizer_config.json / special_tokens_map.json gave.
struct TokenizerSource {
  std::string kind;            // "tokenizer.json" | "vocab"
  std::string bytes;           // the tokenizer.json text, or the vocabulary joined by '\n'
  TokenizerSettings settings;  // used for "vocab"
};

// The directory whose tokenizer a model directory uses (sentence-transformers
// keeps it next to the transformer module, usually the directory itself).
StatusOr<std::string> TokenizerDirectory(const std::string& model_dir);
StatusOr<TokenizerSource> ReadTokenizerSource(const std::string& model_dir);
// The tokenizer of a plan file, or of a model directory (TokenizerDirectory).
StatusOr<std::shared_ptr<Tokenizer>> LoadTokenizerFrom(const std::string& path);

// Writes `model` (fp32 host tensors) as a plan at `path` (atomically: a
// temporary file renamed into place).
Status WritePlan(const Model& model, const TokenizerSource& tokenizer,
                 const PlanBuildOptions& options, const std::string& source_checksum,
                 const std::string& path);

// "crc32c:<hex>" over the files the model's weights were read from
// (Model::weights_files), in name order.
StatusOr<std::string> SourceChecksum(const std::vector<std::string>& weights_files);

}  // namespace bertrt

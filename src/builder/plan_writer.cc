// WritePlan: lays the sections out (aligned), streams them to a temporary
// file with their CRC32Cs, then writes the table and the header and renames
// the file into place, so a reader never sees a half-written plan.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <memory>
#include <vector>

#include "bertrt/quantized_weights.h"
#include "bertrt/plan.h"
#include "core/crc32c.h"
#include "builder/plan_format.h"
#include "builder/plan_layout.h"
#include "core/half.h"

namespace bertrt {
namespace {

using nlohmann::json;
using plan::Entry;
using plan::SectionKind;

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A FILE* that tracks the write position and turns failures into Status.
class Writer {
 public:
  explicit Writer(std::FILE* f) : f_(f) {}
  Status Write(const void* data, size_t n) {
    if (n && std::fwrite(data, 1, n, f_) != n) return Internal("write failed (disk full?)");
    pos_ += n;
    return Status::Ok();
  }
  Status PadTo(uint64_t offset) {
    static const uint8_t kZeros[plan::kPageAlignment] = {};
    while (pos_ < offset)
      RETURN_IF_ERROR(Write(kZeros, std::min<uint64_t>(offset - pos_, sizeof(kZeros))));
    return Status::Ok();
  }
  uint64_t pos() const { return pos_; }

 private:
  std::FILE* f_;
  uint64_t pos_ = 0;
};

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Streams one tensor section (its parts concatenated, converted to `dtype`)
// and returns its CRC32C. Parts already in `dtype` (a plan rebuilt at its own
// precision) are written as they are; others go through fp32 in chunks.
StatusOr<uint32_t> WriteTensor(Writer& w, const std::vector<const Tensor*>& parts, DType dtype) {
  uint32_t crc = 0;
  std::vector<float> wide;
  std::vector<uint16_t> half;
  constexpr size_t kChunk = 1 << 16;
  for (const Tensor* t : parts) {
    if (t->dtype() == dtype) {
      crc = Crc32c(t->raw(), t->nbytes(), crc);
      RETURN_IF_ERROR(w.Write(t->raw(), t->nbytes()));
      continue;
    }
    const size_t n = static_cast<size_t>(t->numel());
    const size_t in_size = DTypeSize(t->dtype());
    for (size_t begin = 0; begin < n; begin += kChunk) {
      const size_t m = std::min(kChunk, n - begin);
      const float* src = nullptr;
      if (t->dtype() == DType::kF32) {
        src = t->f32() + begin;
      } else {
        wide.resize(m);
        WidenToFloat(t->dtype(), static_cast<const char*>(t->raw()) + begin * in_size, m,
                     wide.data());
        src = wide.data();
      }
      if (dtype == DType::kF32) {
        crc = Crc32c(src, m * 4, crc);
        RETURN_IF_ERROR(w.Write(src, m * 4));
        continue;
      }
      half.resize(m);
      NarrowFromFloat(dtype, src, m, half.data());
      crc = Crc32c(half.data(), m * 2, crc);
      RETURN_IF_ERROR(w.Write(half.data(), m * 2));
    }
  }
  return crc;
}

struct PendingSection {
  Entry entry;
  std::string bytes;                 // meta, tokenizer, tuning
  std::vector<const Tensor*> parts;  // tensors
};

json MetaJson(const Model& model, const TokenizerSource& tok, const PlanBuildOptions& o,
              const std::string& source_checksum) {
  json gpu;
  if (o.gpu) gpu = {{"name", o.gpu->name}, {"compute_capability", o.gpu->compute_capability}};
  json meta{
      {"format_version", kPlanFormatVersion},
      {"bertrt_version", BERTRT_VERSION},
      {"created_utc", UtcNow()},
      {"source", std::filesystem::absolute(model.source).string()},
      {"source_checksum", source_checksum},
      {"source_weights_format", model.weights_format},
      {"source_import_notes", model.import_notes},
      {"precision", model.quantized ? QuantFormatName(model.quantized->format)
                                    : PrecisionName(o.precision)},
      {"device", o.device},
      {"gpu", gpu},
      {"max_seq_len", o.max_seq_len > 0 ? o.max_seq_len : model.config.max_seq_length},
      {"max_batch_tokens", o.max_batch_tokens},
      {"config", plan::ConfigToJson(model.config)},
      {"has_pooler", !model.weights.pooler_w.empty()},
      {"untied_mlm_decoder", !model.weights.mlm_decoder_w.empty()},
      {"tokenizer", {{"kind", tok.kind}, {"settings", plan::SettingsToJson(tok.settings)}}},
  };
  if (model.quantized)
    meta[QuantFormatName(model.quantized->format)] = plan::QuantizedToJson(*model.quantized);
  return meta;
}

// The GEMM tuning cache (read back by Reader::ReadGemmChoices): each entry
// names the GPU, cuBLASLt version, precision and shape it was timed for, so
// that an engine elsewhere ignores it.
json TuningJson(const PlanBuildOptions& o) {
  json key;
  if (o.gpu) key = {{"gpu_name", o.gpu->name}, {"compute_capability", o.gpu->compute_capability}};
  json algorithms = json::array();
  for (const GemmChoice& c : o.gemm_choices)
    algorithms.push_back({{"gemm", c.gemm}, {"algo", c.algo}});
  return json{{"key", key}, {"algorithms", algorithms}};
}

// `views` keeps the Tensors made over the 8-bit check's arrays.
std::vector<PendingSection> CollectSections(const Model& model, const TokenizerSource& tok,
                                            const PlanBuildOptions& o,
                                            const std::string& source_checksum,
                                            std::deque<Tensor>* views, Status* status) {
  std::vector<PendingSection> sections;
  auto add_bytes = [&](const char* name, SectionKind kind, std::string bytes) {
    PendingSection s;
    s.entry.name = name;
    s.entry.kind = kind;
    s.entry.length = bytes.size();
    s.bytes = std::move(bytes);
    sections.push_back(std::move(s));
  };
  add_bytes("meta", SectionKind::kMeta, MetaJson(model, tok, o, source_checksum).dump());
  add_bytes("tokenizer", SectionKind::kTokenizer, tok.bytes);
  add_bytes("tuning", SectionKind::kTuning, TuningJson(o).dump());
  // A tensor stored as it is (8-bit weights and their scales, the check's arrays).
  auto add_tensor = [&](const std::string& name, const Tensor* t) {
    PendingSection s;
    s.entry.name = name;
    s.entry.kind = SectionKind::kTensor;
    s.entry.dtype = static_cast<uint32_t>(t->dtype());
    s.entry.rank = static_cast<uint32_t>(t->rank());
    for (size_t d = 0; d < t->rank(); ++d) s.entry.shape[d] = t->dim(d);
    s.entry.length = t->nbytes();
    s.parts = {t};
    sections.push_back(std::move(s));
  };
  const QuantizedWeights* quantized = model.quantized.get();
  if (quantized && o.precision != Precision::kFp32) {
    *status = InvalidArgument("plan writer: an 8-bit model's other weights are stored in fp32");
    return {};
  }
  for (const plan::TensorSpec& spec :
       plan::ExpectedTensors(model.config, !model.weights.pooler_w.empty(),
                             !model.weights.mlm_decoder_w.empty())) {
    if (const QuantizedLinear* q = FindQuantizedLinear(quantized, spec.name)) {
      add_tensor(spec.name, &q->weights);
      add_tensor(plan::ScalesSection(spec.name), &q->scales);
      add_tensor(plan::SmoothingSection(spec.name), &q->smoothing);
      continue;
    }
    PendingSection s;
    for (const model::TensorRef& ref : spec.parts) s.parts.push_back(&ref.In(model.weights));
    int64_t numel = 0;
    for (const Tensor* t : s.parts) {
      if (t->empty() || !IsWeightDType(t->dtype())) {
        *status =
            InvalidArgument("plan writer: " + spec.name + " is missing or not a float tensor");
        return {};
      }
      numel += t->numel();
    }
    int64_t expected = 1;
    for (int64_t d : spec.shape) expected *= d;
    if (numel != expected) {
      *status = InvalidArgument("plan writer: " + spec.name + " has " + std::to_string(numel) +
                                " elements, expected " + ShapeToString(spec.shape));
      return {};
    }
    const DType dtype = plan::StoredDType(o.precision, spec.in_compute_precision);
    s.entry.name = spec.name;
    s.entry.kind = SectionKind::kTensor;
    s.entry.dtype = static_cast<uint32_t>(dtype);
    s.entry.rank = static_cast<uint32_t>(spec.shape.size());
    for (size_t d = 0; d < spec.shape.size(); ++d) s.entry.shape[d] = spec.shape[d];
    s.entry.length = static_cast<uint64_t>(expected) * DTypeSize(dtype);
    sections.push_back(std::move(s));
  }
  if (quantized) {
    // Views of the check's batch and outputs, alive as long as the model.
    const QuantFormat format = quantized->format;
    const RaggedBatch& b = quantized->check_batch;
    for (const auto& [what, ids] : {std::pair{"input_ids", &b.input_ids},
                                    {"token_type_ids", &b.token_type_ids},
                                    {"cu_seqlens", &b.cu_seqlens},
                                    {"pool_start", &b.pool_start}})
      add_tensor(plan::CheckSection(format, what),
                 &views->emplace_back(DType::kI32, std::vector<int64_t>{int64_t(ids->size())},
                                      ids->data(), nullptr));
    for (const auto& [prefix, outputs] : {std::pair{"out.", &quantized->check_outputs},
                                          {"ref.", &quantized->check_reference}})
      for (const NamedOutput& out : outputs->outputs)
        add_tensor(plan::CheckSection(format, prefix + out.name),
                   &views->emplace_back(DType::kF32,
                                        std::vector<int64_t>{
                                            int64_t(out.data.size()) / out.width, out.width},
                                        out.data.data(), nullptr));
  }
  for (const PendingSection& s : sections)
    if (s.entry.name.size() >= plan::kNameSize) {
      *status = Internal("plan writer: section name " + s.entry.name + " is too long");
      return {};
    }
  return sections;
}

Status WriteAll(std::FILE* f, std::vector<PendingSection>& sections) {
  Writer w(f);
  RETURN_IF_ERROR(w.PadTo(plan::kHeaderSize));
  for (PendingSection& s : sections) {
    // Page-aligned large tensors can be mapped or DMA'd page by page.
    const uint64_t align =
        s.entry.length >= plan::kPageAlignment ? plan::kPageAlignment : plan::kMinAlignment;
    RETURN_IF_ERROR(w.PadTo(AlignUp(w.pos(), align)));
    s.entry.offset = w.pos();
    if (s.entry.kind == SectionKind::kTensor) {
      ASSIGN_OR_RETURN(s.entry.crc, WriteTensor(w, s.parts, static_cast<DType>(s.entry.dtype)));
    } else {
      s.entry.crc = Crc32c(s.bytes.data(), s.bytes.size());
      RETURN_IF_ERROR(w.Write(s.bytes.data(), s.bytes.size()));
    }
  }
  RETURN_IF_ERROR(w.PadTo(AlignUp(w.pos(), plan::kMinAlignment)));
  plan::Header h;
  h.version = kPlanFormatVersion;
  h.table_offset = w.pos();
  h.section_count = static_cast<uint32_t>(sections.size());
  std::vector<uint8_t> table(sections.size() * plan::kEntrySize);
  for (size_t i = 0; i < sections.size(); ++i)
    plan::EncodeEntry(sections[i].entry, table.data() + i * plan::kEntrySize);
  h.table_crc = Crc32c(table.data(), table.size());
  RETURN_IF_ERROR(w.Write(table.data(), table.size()));
  h.file_size = w.pos();
  uint8_t header[plan::kHeaderSize];
  plan::EncodeHeader(h, header);
  plan::SealHeader(header);
  if (std::fseek(f, 0, SEEK_SET) != 0) return Internal("seek failed");
  Writer hw(f);
  return hw.Write(header, sizeof(header));
}

}  // namespace

Status WritePlan(const Model& model, const TokenizerSource& tokenizer,
                 const PlanBuildOptions& options, const std::string& source_checksum,
                 const std::string& path) {
  Status status;
  std::deque<Tensor> views;
  std::vector<PendingSection> sections =
      CollectSections(model, tokenizer, options, source_checksum, &views, &status);
  RETURN_IF_ERROR(status);
  // A name of this process's own, so that two builds of one plan never write
  // into each other's file; the rename then replaces the plan atomically.
  const std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return NotFound(tmp + ": cannot create (" + std::strerror(errno) + ")");
  Status written = WriteAll(f, sections);
  if (std::fflush(f) != 0 && written.ok()) written = Internal("flush failed (disk full?)");
  if (std::fclose(f) != 0 && written.ok()) written = Internal("close failed (disk full?)");
  std::error_code ec;
  if (written.ok()) std::filesystem::rename(tmp, path, ec);
  if (!written.ok() || ec) {
    std::filesystem::remove(tmp, ec);
    return written.ok() ? Internal(path + ": cannot rename the finished plan into place")
                        : Status(written.code(), tmp + ": " + written.message());
  }
  return Status::Ok();
}

}  // namespace bertrt

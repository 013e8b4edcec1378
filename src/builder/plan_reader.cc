// ReadPlan: every byte of a plan is untrusted. The container (header, table,
// each section's bounds) is validated before any section is looked at, the
// checksums before any section is parsed, and the metadata before any tensor
// is bound; a failure names what was wrong and how to rebuild.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "bertrt/quantized_weights.h"
#include "bertrt/plan.h"
#include "core/crc32c.h"
#include "builder/plan_format.h"
#include "builder/plan_layout.h"
#include "core/files.h"
#include "model/model_check.h"

namespace bertrt {
namespace {

using nlohmann::json;
using plan::Entry;
using plan::SectionKind;

// The container after validation: every entry lies inside `bytes`.
struct Container {
  std::string_view bytes;
  plan::Header header;
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;
  const Entry* Find(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &entries[it->second];
  }
  std::string_view Bytes(const Entry& e) const { return bytes.substr(e.offset, e.length); }
};

class Reader {
 public:
  explicit Reader(std::string name) : name_(std::move(name)) {}

  // A failure, with what to do about it.
  Status Error(StatusCode code, const std::string& what) const {
    return Status(code, name_ + ": " + what + "; rebuild with: bertrt build " +
                            (source_.empty() ? std::string("MODEL_DIR") : source_) + build_flags_ +
                            " -o " + name_);
  }

  Status ParseContainer(std::string_view bytes, Container* c);
  Status CheckSection(const Container& c, const Entry& e) const;
  Status CheckAllSections(const Container& c) const;
  Status ParseMeta(const Container& c, json* meta, PlanInfo* info);
  Status BindTensors(const Container& c, const json& meta, const PlanInfo& info,
                     std::shared_ptr<const void> owner, Model* model) const;
  StatusOr<std::shared_ptr<Tokenizer>> LoadTokenizer(const Container& c, const json& meta) const;
  StatusOr<std::vector<GemmChoice>> ReadGemmChoices(const Container& c) const;
  template <class View>
  Status BindQuantizationCheck(View& view, int sequences, int tokens, QuantizedWeights* q) const;

 private:
  Status CheckEntry(const Container& c, const Entry& e, size_t i) const;
  std::string name_;
  std::string source_;  // from the metadata, once read
  // " --precision P [--device cuda]": how the plan was built, once read.
  std::string build_flags_;
};

Status Reader::ParseContainer(std::string_view bytes, Container* c) {
  c->bytes = bytes;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 12 || std::memcmp(p, plan::kMagic, 8) != 0)
    return InvalidArgument(name_ + ": not a bertrt plan (no BERTRTPL magic)");
  // The version sits right after the magic in every format version, so a
  // plan of another version is named as such, not as corrupted.
  const uint32_t version = plan::GetU32(p + 8);
  if (version != kPlanFormatVersion)
    return Error(StatusCode::kFailedPrecondition, "plan format version " + std::to_string(version) +
                                                      ", but this bertrt (" + BERTRT_VERSION +
                                                      ") reads plan format version " +
                                                      std::to_string(kPlanFormatVersion));
  if (bytes.size() < plan::kHeaderSize)
    return Error(StatusCode::kDataLoss, "truncated: " + std::to_string(bytes.size()) +
                                            " bytes, less than the 64-byte header");
  if (!plan::HeaderSealed(p))
    return Error(StatusCode::kDataLoss, "header checksum mismatch (corrupted header)");
  plan::Header& h = c->header;
  h = plan::DecodeHeader(p);
  if (h.header_size != plan::kHeaderSize || h.entry_size != plan::kEntrySize)
    return Error(StatusCode::kDataLoss, "header or table entry size is not the version's");
  if (h.file_size != bytes.size())
    return Error(StatusCode::kDataLoss, "the file is " + std::to_string(bytes.size()) +
                                            " bytes but its header says " +
                                            std::to_string(h.file_size) + " (truncated?)");
  if (h.section_count == 0 || h.section_count > plan::kMaxSections)
    return Error(StatusCode::kDataLoss, "section count " + std::to_string(h.section_count) +
                                            " outside [1, " + std::to_string(plan::kMaxSections) +
                                            "]");
  const uint64_t table_bytes = uint64_t{h.section_count} * plan::kEntrySize;
  if (h.table_offset < plan::kHeaderSize || h.table_offset > bytes.size() ||
      bytes.size() - h.table_offset != table_bytes)
    return Error(
        StatusCode::kDataLoss,
        "the section table (offset " + std::to_string(h.table_offset) + ") does not end the file");
  const uint8_t* table = p + h.table_offset;
  if (Crc32c(table, table_bytes) != h.table_crc)
    return Error(StatusCode::kDataLoss, "section table checksum mismatch (corrupted table)");
  for (uint32_t i = 0; i < h.section_count; ++i) {
    const uint8_t* raw = table + i * plan::kEntrySize;
    if (std::memchr(raw, 0, plan::kNameSize) == nullptr)
      return Error(StatusCode::kDataLoss,
                   "section " + std::to_string(i) + " has an unterminated name");
    c->entries.push_back(plan::DecodeEntry(raw));
    RETURN_IF_ERROR(CheckEntry(*c, c->entries.back(), i));
    if (!c->index.emplace(c->entries.back().name, i).second)
      return Error(StatusCode::kDataLoss, "two sections are named " + c->entries.back().name);
  }
  std::vector<const Entry*> by_offset;
  for (const Entry& e : c->entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->length > by_offset[i]->offset)
      return Error(StatusCode::kDataLoss, "sections " + by_offset[i - 1]->name + " and " +
                                              by_offset[i]->name + " overlap");
  return Status::Ok();
}

Status Reader::CheckEntry(const Container& c, const Entry& e, size_t i) const {
  const std::string what = "section " + std::to_string(i) + " (" + e.name + ")";
  if (e.name.empty()) return Error(StatusCode::kDataLoss, what + " has an empty name");
  if (e.kind != SectionKind::kMeta && e.kind != SectionKind::kTokenizer &&
      e.kind != SectionKind::kTensor && e.kind != SectionKind::kTuning)
    return Error(StatusCode::kDataLoss, what + " has an unknown kind");
  // Sections live between the header and the table, 64-byte aligned.
  const uint64_t end = c.header.table_offset;
  if (e.offset % plan::kMinAlignment != 0)
    return Error(StatusCode::kDataLoss,
                 what + ": offset " + std::to_string(e.offset) + " is not 64-byte aligned");
  if (e.offset < plan::kHeaderSize || e.offset > end || e.length > end - e.offset)
    return Error(StatusCode::kOutOfRange, what + ": offset " + std::to_string(e.offset) +
                                              " + length " + std::to_string(e.length) +
                                              " is outside the data area [64, " +
                                              std::to_string(end) + ")");
  if (e.kind != SectionKind::kTensor) return Status::Ok();
  const DType dtype = static_cast<DType>(e.dtype);
  if (e.dtype > static_cast<uint32_t>(DType::kF8E4M3) ||
      !(IsWeightDType(dtype) || dtype == DType::kI8 || dtype == DType::kF8E4M3 ||
        dtype == DType::kI32))
    return Error(StatusCode::kDataLoss, what + " has dtype code " + std::to_string(e.dtype) +
                                            "; plans hold F32, F16, BF16, I8, F8_E4M3 or I32");
  if (e.rank == 0 || e.rank > plan::kMaxRank)
    return Error(StatusCode::kDataLoss, what + " has rank " + std::to_string(e.rank));
  uint64_t bytes = DTypeSize(dtype);
  for (uint32_t d = 0; d < e.rank; ++d) {
    if (e.shape[d] <= 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(e.shape[d]), &bytes))
      return Error(StatusCode::kDataLoss,
                   what + " has a bad dimension " + std::to_string(e.shape[d]));
  }
  if (bytes != e.length)
    return Error(StatusCode::kDataLoss, what + " is " + std::to_string(e.length) +
                                            " bytes but its shape needs " + std::to_string(bytes));
  return Status::Ok();
}

Status Reader::CheckSection(const Container& c, const Entry& e) const {
  const std::string_view b = c.Bytes(e);
  if (Crc32c(b.data(), b.size()) != e.crc)
    return Error(StatusCode::kDataLoss, "section " + e.name + " (offset " +
                                            std::to_string(e.offset) +
                                            ") fails its CRC32C checksum: the file is corrupted");
  return Status::Ok();
}

Status Reader::CheckAllSections(const Container& c) const {
  // Sections are independent; checking them on all cores keeps a cold or
  // warm load of a large plan bound by the reads, not the checksums.
  std::vector<Status> results(c.entries.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < c.entries.size(); ++i) results[i] = CheckSection(c, c.entries[i]);
  for (Status& s : results) RETURN_IF_ERROR(s);
  return Status::Ok();
}

// The tuning section: {"key": {the GPU it was built on}, "algorithms":
// [{"gemm": GemmChoice::gemm, "algo": 128 hex digits}, ...]}. cuBLASLt checks
// each algorithm again before an engine runs it.
StatusOr<std::vector<GemmChoice>> Reader::ReadGemmChoices(const Container& c) const {
  const Entry* e = c.Find("tuning");
  if (!e || e->kind != SectionKind::kTuning || e->length > plan::kMaxMetaBytes)
    return Error(StatusCode::kDataLoss, "no valid tuning section");
  RETURN_IF_ERROR(CheckSection(c, *e));
  const json tuning = json::parse(c.Bytes(*e), nullptr, /*allow_exceptions=*/false);
  auto algorithms = tuning.is_object() ? tuning.find("algorithms") : tuning.end();
  if (tuning.is_discarded() || !tuning.is_object() || algorithms == tuning.end() ||
      !algorithms->is_array())
    return Error(StatusCode::kDataLoss, "the tuning section has no algorithms array");
  std::vector<GemmChoice> choices;
  for (const json& a : *algorithms) {
    auto gemm = a.is_object() ? a.find("gemm") : a.end();
    auto algo = a.is_object() ? a.find("algo") : a.end();
    if (gemm == a.end() || algo == a.end() || !gemm->is_string() || !algo->is_string())
      return Error(StatusCode::kDataLoss, "a tuning entry lacks its gemm or algo string");
    GemmChoice choice{gemm->get<std::string>(), algo->get<std::string>()};
    if (!choice.AlgoWellFormed())
      return Error(StatusCode::kDataLoss,
                   "the tuning entry for " + choice.gemm + " is not 128 lowercase hex digits");
    choices.push_back(std::move(choice));
  }
  return choices;
}

Status Reader::ParseMeta(const Container& c, json* meta, PlanInfo* info) {
  const Entry* e = c.Find("meta");
  if (!e || e->kind != SectionKind::kMeta || e->length > plan::kMaxMetaBytes)
    return Error(StatusCode::kDataLoss, "no valid metadata section");
  RETURN_IF_ERROR(CheckSection(c, *e));
  *meta = json::parse(c.Bytes(*e), nullptr, /*allow_exceptions=*/false);
  if (meta->is_discarded() || !meta->is_object())
    return Error(StatusCode::kDataLoss, "the metadata is not a JSON object");
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = meta->find(key);
    if (it == meta->end() || !it->is_string())
      return Error(StatusCode::kDataLoss, std::string("metadata field ") + key + " is missing");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  auto num = [&](const char* key, int* out) -> Status {
    auto it = meta->find(key);
    if (it == meta->end() || !it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > (1 << 30))
      return Error(StatusCode::kDataLoss, std::string("metadata field ") + key + " is missing");
    *out = static_cast<int>(it->get<int64_t>());
    return Status::Ok();
  };
  RETURN_IF_ERROR(str("source", &info->source));
  source_ = info->source;
  RETURN_IF_ERROR(str("bertrt_version", &info->bertrt_version));
  RETURN_IF_ERROR(str("created_utc", &info->created_utc));
  RETURN_IF_ERROR(str("source_checksum", &info->source_checksum));
  // Optional: plans written before the importer read other formats lack it.
  if (auto f = meta->find("source_weights_format"); f != meta->end() && f->is_string())
    info->source_weights_format = f->get<std::string>();
  if (auto f = meta->find("source_import_notes"); f != meta->end() && f->is_array())
    for (const json& note : *f)
      if (note.is_string()) info->source_import_notes.push_back(note.get<std::string>());
  RETURN_IF_ERROR(str("precision", &info->precision));
  RETURN_IF_ERROR(str("device", &info->device));
  RETURN_IF_ERROR(num("max_seq_len", &info->max_seq_len));
  RETURN_IF_ERROR(num("max_batch_tokens", &info->max_batch_tokens));
  if (plan::QuantizedPlanFormat(info->precision)) {
    auto object = meta->find(info->precision);
    if (object == meta->end() || !object->is_object() || !object->contains("report"))
      return Error(StatusCode::kDataLoss, "an " + info->precision + " plan's metadata has no " +
                                              info->precision + " report");
    auto parsed = plan::ReportFromJson((*object)["report"]);
    if (!parsed.ok()) return Error(StatusCode::kDataLoss, parsed.status().message());
    info->quantization = std::move(parsed).value();
  } else if (!ParsePrecision(info->precision).ok()) {
    return Error(StatusCode::kDataLoss, "unknown precision " + info->precision);
  }
  build_flags_ =
      " --precision " + info->precision + (info->device == "cuda" ? " --device cuda" : "");
  auto gpu = meta->find("gpu");
  if (gpu != meta->end() && gpu->is_object()) {
    auto name = gpu->find("name");
    auto cc = gpu->find("compute_capability");
    if (name != gpu->end() && name->is_string()) info->gpu_name = name->get<std::string>();
    if (cc != gpu->end() && cc->is_number_integer())
      info->gpu_compute_capability = static_cast<int>(cc->get<int64_t>());
  }
  auto tok = meta->find("tokenizer");
  if (tok == meta->end() || !tok->is_object() || !tok->contains("kind") ||
      !(*tok)["kind"].is_string())
    return Error(StatusCode::kDataLoss, "metadata has no tokenizer kind");
  info->tokenizer_kind = (*tok)["kind"].get<std::string>();
  info->format_version = c.header.version;
  info->file_size = c.header.file_size;
  info->num_sections = c.entries.size();
  return Status::Ok();
}

Status Reader::BindTensors(const Container& c, const json& meta, const PlanInfo& info,
                           std::shared_ptr<const void> owner, Model* model) const {
  auto config = meta.find("config");
  if (config == meta.end()) return Error(StatusCode::kDataLoss, "metadata has no config");
  auto parsed = plan::ConfigFromJson(*config);
  if (!parsed.ok()) return Error(StatusCode::kDataLoss, parsed.status().message());
  model->config = std::move(parsed).value();
  auto has_pooler = meta.find("has_pooler");
  if (has_pooler == meta.end() || !has_pooler->is_boolean())
    return Error(StatusCode::kDataLoss, "metadata field has_pooler is missing");
  // An 8-bit plan's other tensors are an fp32 plan's.
  const std::optional<QuantFormat> format = plan::QuantizedPlanFormat(info.precision);
  const Precision precision = format ? Precision::kFp32 : *ParsePrecision(info.precision);
  // Absent in plans written before masked-LM heads.
  auto untied = meta.find("untied_mlm_decoder");
  if (untied != meta.end() && !untied->is_boolean())
    return Error(StatusCode::kDataLoss, "metadata field untied_mlm_decoder is not a boolean");
  const auto specs = plan::ExpectedTensors(model->config, has_pooler->get<bool>(),
                                           untied != meta.end() && untied->get<bool>());
  std::shared_ptr<QuantizedWeights> quantized;
  int check_sequences = 0, check_tokens = 0;
  size_t expected_sections = specs.size();
  if (format) {
    auto parsed = plan::QuantizedFromJson(meta.at(info.precision), *format, specs,
                                          &check_sequences, &check_tokens);
    if (!parsed.ok()) return Error(StatusCode::kDataLoss, parsed.status().message());
    quantized = std::make_shared<QuantizedWeights>(std::move(parsed).value());
    // Scales and smoothing per Linear; the check's four arrays, outputs and
    // (fp8) the fp32 reference's.
    expected_sections += 2 * quantized->linears.size() + 4 +
                         quantized->check_outputs.outputs.size() +
                         quantized->check_reference.outputs.size();
  }
  size_t tensor_sections = 0;
  for (const Entry& e : c.entries) tensor_sections += e.kind == SectionKind::kTensor;
  if (tensor_sections != expected_sections)
    return Error(StatusCode::kDataLoss, std::to_string(tensor_sections) +
                                            " tensor sections, but the config needs " +
                                            std::to_string(expected_sections));
  const auto* base = reinterpret_cast<const uint8_t*>(c.bytes.data());
  // A section that must exist with this dtype and shape: a view of it.
  auto view = [&](const std::string& name, DType want,
                  const std::vector<int64_t>& shape) -> StatusOr<Tensor> {
    const Entry* e = c.Find(name);
    if (!e || e->kind != SectionKind::kTensor)
      return Error(StatusCode::kDataLoss, "tensor " + name + " is missing");
    const std::vector<int64_t> stored(e->shape, e->shape + e->rank);
    if (static_cast<DType>(e->dtype) != want || stored != shape)
      return Error(StatusCode::kDataLoss, "tensor " + name + " is " +
                                              DTypeName(static_cast<DType>(e->dtype)) +
                                              ShapeToString(stored) + ", expected " +
                                              DTypeName(want) + ShapeToString(shape));
    return Tensor(want, shape, base + e->offset, owner);
  };
  model->weights.layers.resize(static_cast<size_t>(model->config.num_layers));
  model->weights.dense.resize(model->config.dense.size());
  for (const plan::TensorSpec& spec : specs) {
    if (FindQuantizedLinear(quantized.get(), spec.name)) {
      // The 8-bit weights, as they are; their scales and smoothing beside
      // them: int8 a scale per output row, fp8 one.
      const bool fp8 = *format == QuantFormat::kFp8;
      QuantizedLinear& l = quantized->linears[spec.name];
      ASSIGN_OR_RETURN(l.weights, view(spec.name, fp8 ? DType::kF8E4M3 : DType::kI8, spec.shape));
      ASSIGN_OR_RETURN(l.scales, view(plan::ScalesSection(spec.name), DType::kF32,
                                      {fp8 ? 1 : spec.shape[0]}));
      ASSIGN_OR_RETURN(l.smoothing, view(plan::SmoothingSection(spec.name), DType::kF32,
                                         {spec.shape[1]}));
      for (const Tensor* t : {&l.scales, &l.smoothing})
        if (!std::all_of(t->f32(), t->f32() + t->numel(),
                         [](float v) { return std::isfinite(v) && v > 0.0f; }))
          return Error(StatusCode::kDataLoss, info.precision + " scales or smoothing of " +
                                                  spec.name + " are not all positive");
      // E4M3 has one NaN code per sign (S.1111.111) and no infinities.
      const auto* codes = static_cast<const uint8_t*>(l.weights.raw());
      if (fp8 && std::any_of(codes, codes + l.weights.numel(),
                             [](uint8_t c) { return (c & 0x7f) == 0x7f; }))
        return Error(StatusCode::kDataLoss, "fp8 weights of " + spec.name + " hold NaN");
      continue;
    }
    const DType want = plan::StoredDType(precision, spec.in_compute_precision);
    ASSIGN_OR_RETURN(const Tensor stored, view(spec.name, want, spec.shape));
    // Views of the mapping in the stored dtype (the buffer is 8-byte aligned
    // and sections 64-byte aligned): the CUDA engine uploads fp16/bf16 as
    // they are, the CPU engine widens its own copy.
    const auto* whole = static_cast<const uint8_t*>(stored.raw());
    std::vector<Tensor*> parts;
    for (const model::TensorRef& ref : spec.parts) parts.push_back(&ref.In(model->weights));
    // Q, K and V are equal row blocks of the packed tensor.
    const int64_t rows = spec.shape[0] / static_cast<int64_t>(parts.size());
    const int64_t row_bytes =
        (spec.shape.size() == 2 ? spec.shape[1] : 1) * static_cast<int64_t>(DTypeSize(want));
    for (size_t k = 0; k < parts.size(); ++k) {
      std::vector<int64_t> part_shape = spec.shape;
      part_shape[0] = rows;
      *parts[k] = Tensor(want, std::move(part_shape),
                         whole + static_cast<int64_t>(k) * rows * row_bytes, owner);
      if (Status finite = CheckFinite(*parts[k], "tensor " + spec.name); !finite.ok())
        return Error(StatusCode::kDataLoss, finite.message());
    }
  }
  if (quantized) {
    RETURN_IF_ERROR(BindQuantizationCheck(view, check_sequences, check_tokens, quantized.get()));
    model->quantized = std::move(quantized);
  }
  Status check = CheckModel(*model);
  if (!check.ok()) return Error(StatusCode::kDataLoss, check.message());
  return Status::Ok();
}

// The 8-bit check's batch and outputs, copied out of their sections; the
// batch's ids are checked when the engine runs it (ValidateBatch).
template <class View>
Status Reader::BindQuantizationCheck(View& view, int sequences, int tokens, QuantizedWeights* q) const {
  RaggedBatch& b = q->check_batch;
  for (const auto& [what, ids, n] :
       {std::tuple{"input_ids", &b.input_ids, tokens}, {"token_type_ids", &b.token_type_ids, tokens},
        {"cu_seqlens", &b.cu_seqlens, sequences + 1}, {"pool_start", &b.pool_start, sequences}}) {
    ASSIGN_OR_RETURN(const Tensor t, view(plan::CheckSection(q->format, what), DType::kI32, {n}));
    const auto* data = static_cast<const int32_t*>(t.raw());
    ids->assign(data, data + n);
  }
  b.max_len = 0;
  for (int s = 0; s < sequences; ++s) {
    const int64_t len = int64_t(b.cu_seqlens[s + 1]) - b.cu_seqlens[s];
    if (len <= 0 || b.cu_seqlens[0] != 0 || b.cu_seqlens.back() != tokens)
      return Error(StatusCode::kDataLoss, std::string("the ") + QuantFormatName(q->format) +
                                              " check's cu_seqlens are not its sequences'");
    b.max_len = std::max(b.max_len, static_cast<int>(len));
  }
  for (const auto& [prefix, outputs] :
       {std::pair{"out.", &q->check_outputs}, {"ref.", &q->check_reference}}) {
    for (NamedOutput& out : outputs->outputs) {
      const std::string name = plan::CheckSection(q->format, prefix + out.name);
      ASSIGN_OR_RETURN(const Tensor t,
                       view(name, DType::kF32, {out.per_token ? tokens : sequences, out.width}));
      if (Status finite = CheckFinite(t, "tensor " + name); !finite.ok())
        return Error(StatusCode::kDataLoss, finite.message());
      out.data.assign(t.f32(), t.f32() + t.numel());
    }
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<Tokenizer>> Reader::LoadTokenizer(const Container& c,
                                                           const json& meta) const {
  const Entry* e = c.Find("tokenizer");
  if (!e || e->kind != SectionKind::kTokenizer)
    return Error(StatusCode::kDataLoss, "no tokenizer section");
  const std::string_view bytes = c.Bytes(*e);
  const json& tok = meta["tokenizer"];
  const std::string kind = tok["kind"].get<std::string>();
  StatusOr<std::shared_ptr<Tokenizer>> loaded = Internal("unreachable");
  if (kind == "tokenizer.json") {
    loaded = Tokenizer::FromTokenizerJson(bytes);
  } else if (kind == "vocab") {
    auto settings = plan::SettingsFromJson(tok.contains("settings") ? tok["settings"] : json());
    if (!settings.ok()) return Error(StatusCode::kDataLoss, settings.status().message());
    std::vector<std::string> vocab;
    size_t begin = 0;
    while (begin <= bytes.size()) {
      size_t end = bytes.find('\n', begin);
      if (end == std::string_view::npos) end = bytes.size();
      vocab.emplace_back(bytes.substr(begin, end - begin));
      begin = end + 1;
    }
    loaded = Tokenizer::FromVocab(std::move(vocab), std::move(settings).value());
  } else {
    return Error(StatusCode::kDataLoss, "unknown tokenizer kind " + kind);
  }
  if (!loaded.ok()) return Error(StatusCode::kDataLoss, "tokenizer: " + loaded.status().message());
  return loaded;
}

struct Mapping {
  const void* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data) munmap(const_cast<void*>(data), size);
  }
};

// A plan mapped for `bertrt inspect`, which reads its header and metadata
// and lets go; plans that are served are read into memory (ReadPlan).
StatusOr<std::shared_ptr<Mapping>> MapFile(const std::string& path) {
  ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path));
  const int fd = file.fd;
  if (file.size < plan::kHeaderSize) {
    close(fd);
    return DataLoss(path + ": truncated: " + std::to_string(file.size) +
                    " bytes, less than the 64-byte plan header");
  }
  auto m = std::make_shared<Mapping>();
  void* p = mmap(nullptr, file.size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Internal(path + ": mmap failed (" + std::strerror(errno) + ")");
  m->data = p;
  m->size = file.size;
  return m;
}

}  // namespace

bool IsPlanFile(const std::string& path) {
  auto file = OpenRegularFile(path);
  if (!file.ok()) return false;
  char magic[8] = {};
  const bool ok = read(file->fd, magic, sizeof(magic)) == static_cast<ssize_t>(sizeof(magic)) &&
                  std::memcmp(magic, plan::kMagic, 8) == 0;
  close(file->fd);
  return ok;
}

std::string PlanPath(const std::string& path) {
  if (IsPlanFile(path)) return path;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return "";
  for (const char* model_file : {"config.json", "bert_config.json", "modules.json"})
    if (fs::exists(fs::path(path) / model_file, ec)) return "";
  std::string found;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.path().extension() != ".plan" || !IsPlanFile(entry.path().string())) continue;
    if (!found.empty()) return "";  // several: the user names one
    found = entry.path().string();
  }
  return found;
}

StatusOr<Plan> ReadPlanFromMemory(std::string_view bytes, std::shared_ptr<const void> owner,
                                  const std::string& display_name) {
  // Zero-copy views need 4-byte alignment; the offsets are 64-aligned
  // relative to the start, so only a misaligned buffer (possible from
  // memory, never from mmap) is copied, once.
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0) {
    auto copy = std::make_shared<std::vector<uint64_t>>((bytes.size() + 7) / 8);
    std::memcpy(copy->data(), bytes.data(), bytes.size());
    bytes = std::string_view(reinterpret_cast<const char*>(copy->data()), bytes.size());
    owner = copy;
  }
  Reader reader(display_name);
  Container c;
  RETURN_IF_ERROR(reader.ParseContainer(bytes, &c));
  RETURN_IF_ERROR(reader.CheckAllSections(c));
  Plan plan;
  json meta;
  RETURN_IF_ERROR(reader.ParseMeta(c, &meta, &plan.info));
  plan.model = std::make_shared<Model>();
  RETURN_IF_ERROR(reader.BindTensors(c, meta, plan.info, owner, plan.model.get()));
  plan.model->source = display_name;
  plan.model->import_notes = plan.info.source_import_notes;
  plan.model->max_batch_tokens = plan.info.max_batch_tokens;
  ASSIGN_OR_RETURN(plan.model->gemm_choices, reader.ReadGemmChoices(c));
  plan.info.gemm_choices = plan.model->gemm_choices->size();
  ASSIGN_OR_RETURN(plan.tokenizer, reader.LoadTokenizer(c, meta));
  if (plan.tokenizer->vocab_size() > static_cast<size_t>(plan.model->config.vocab_size))
    return reader.Error(StatusCode::kDataLoss, "the tokenizer has more tokens than vocab_size");
  return plan;
}

// Into memory of our own, not mapped: the weights are views of it, served
// as they are (ReadRegularFileIntoMemory says why).
StatusOr<Plan> ReadPlan(const std::string& path) {
  ASSIGN_OR_RETURN(FileBytes file, ReadRegularFileIntoMemory(path));
  if (file.bytes.size() < plan::kHeaderSize)
    return DataLoss(path + ": truncated: " + std::to_string(file.bytes.size()) +
                    " bytes, less than the 64-byte plan header");
  return ReadPlanFromMemory(file.bytes, std::move(file.owner), path);
}

StatusOr<PlanInfo> ReadPlanInfo(const std::string& path) {
  ASSIGN_OR_RETURN(auto mapping, MapFile(path));
  Reader reader(path);
  Container c;
  RETURN_IF_ERROR(reader.ParseContainer(
      std::string_view(static_cast<const char*>(mapping->data), mapping->size), &c));
  PlanInfo info;
  json meta;
  RETURN_IF_ERROR(reader.ParseMeta(c, &meta, &info));
  ASSIGN_OR_RETURN(const std::vector<GemmChoice> choices, reader.ReadGemmChoices(c));
  info.gemm_choices = choices.size();
  return info;
}

}  // namespace bertrt

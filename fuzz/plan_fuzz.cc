// libFuzzer target: ReadPlanFromMemory over arbitrary bytes must return a
// Status or a plan whose every tensor (an int8 plan's weights, scales and
// check among them) lies in memory it may read and whose tokenizer works.
// Each input is read twice: as it is, and with its checksums made right, so
// that mutations also reach what the reader checks past the CRCs (the
// metadata, the shapes, the int8 sections), not only the CRCs themselves.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "bertrt/quantized_weights.h"
#include "bertrt/plan.h"
#include "builder/plan_format.h"
#include "core/crc32c.h"

namespace {

namespace plan = bertrt::plan;

// Every byte of the tensor, whatever its dtype.
void Touch(const bertrt::Tensor& t, volatile uint8_t& sink) {
  if (t.empty()) return;  // heads without a pooler or classifier
  const auto* p = static_cast<const uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) sink = sink + p[i];
}

// `bytes` with the CRC32C of each section the table places inside them, of
// the table and of the header recomputed; other fields as they are.
std::string Resealed(std::string bytes) {
  if (bytes.size() < plan::kHeaderSize || std::memcmp(bytes.data(), plan::kMagic, 8) != 0)
    return bytes;
  auto* p = reinterpret_cast<uint8_t*>(bytes.data());
  const plan::Header h = plan::DecodeHeader(p);
  const uint64_t table_bytes = uint64_t{h.section_count} * plan::kEntrySize;
  if (h.section_count <= plan::kMaxSections && h.table_offset <= bytes.size() &&
      bytes.size() - h.table_offset >= table_bytes) {
    uint8_t* table = p + h.table_offset;
    for (uint32_t i = 0; i < h.section_count; ++i) {
      uint8_t* entry = table + size_t(i) * plan::kEntrySize;
      const plan::Entry e = plan::DecodeEntry(entry);
      if (e.offset <= bytes.size() && e.length <= bytes.size() - e.offset)
        plan::PutU32(entry + plan::kEntryCrcAt, bertrt::Crc32c(p + e.offset, e.length));
    }
    plan::PutU32(p + plan::kTableCrcAt, bertrt::Crc32c(table, table_bytes));
  }
  plan::SealHeader(p);
  return bytes;
}

void Read(std::string input) {
  // A private copy: its exact size lets ASan flag any read past the end.
  auto bytes = std::make_shared<std::string>(std::move(input));
  auto read = bertrt::ReadPlanFromMemory(*bytes, bytes, "fuzz.plan");
  if (!read.ok()) return;
  volatile uint8_t sink = 0;
  for (const bertrt::Tensor* t : read->model->weights.All()) Touch(*t, sink);
  if (const bertrt::QuantizedWeights* int8 = read->model->quantized.get()) {
    for (const auto& [name, l] : int8->linears)
      for (const bertrt::Tensor* t : {&l.weights, &l.scales, &l.smoothing}) Touch(*t, sink);
    for (const bertrt::NamedOutput& o : int8->check_outputs.outputs)
      for (float v : o.data) sink = sink + static_cast<uint8_t>(v != 0);
  }
  auto enc = read->tokenizer->Encode("fuzz the plan 模型", std::string_view("pair"), 16);
  (void)enc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Read(bytes);
  Read(Resealed(bytes));
  return 0;
}

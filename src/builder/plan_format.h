// The plan file's binary layout, shared by the writer and the reader. Every
// integer is little-endian; fields are (de)serialized one by one so the layout
// never depends on the compiler's struct packing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/crc32c.h"

namespace bertrt::plan {

inline constexpr char kMagic[8] = {'B', 'E', 'R', 'T', 'R', 'T', 'P', 'L'};
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr uint32_t kEntrySize = 144;
inline constexpr uint32_t kNameSize = 64;  // NUL-padded; at most 63 name bytes
inline constexpr uint32_t kMaxRank = 4;
// Far above what any BERT needs (6 sections per layer + ~12), low enough that
// a hostile count cannot make the reader allocate much.
inline constexpr uint32_t kMaxSections = 4096;
inline constexpr uint64_t kMinAlignment = 64;  // every section starts on this
inline constexpr uint64_t kPageAlignment = 4096;  // large tensors start on a page
inline constexpr uint64_t kMaxMetaBytes = 64ull << 20;

// Header: magic[8] version:u32 header_size:u32 file_size:u64 table_offset:u64
// section_count:u32 entry_size:u32 table_crc:u32 reserved[16] header_crc:u32
// (CRC32C of bytes [0, 60)).
// Where the checksums sit: the header's own (over the bytes before it), the
// table's in the header, each section's in its entry.
inline constexpr size_t kHeaderCrcAt = 60, kTableCrcAt = 40, kEntryCrcAt = 76;

struct Header {
  uint32_t version = 0;
  uint32_t header_size = kHeaderSize;
  uint64_t file_size = 0;
  uint64_t table_offset = 0;
  uint32_t section_count = 0;
  uint32_t entry_size = kEntrySize;
  uint32_t table_crc = 0;
};

enum class SectionKind : uint32_t { kMeta = 1, kTokenizer = 2, kTensor = 3, kTuning = 4 };

// Entry (144 B): name[64] kind:u32@64 dtype:u32@68 rank:u32@72 crc:u32@76
// shape[4]:i64@80 offset:u64@112 length:u64@120 reserved[16]@128.
struct Entry {
  std::string name;
  SectionKind kind = SectionKind::kTensor;
  uint32_t dtype = 0;  // a bertrt::DType value; tensors only
  uint32_t rank = 0;
  int64_t shape[kMaxRank] = {0, 0, 0, 0};
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t crc = 0;
};

inline void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline void EncodeHeader(const Header& h, uint8_t* p) {
  std::memset(p, 0, kHeaderSize);
  std::memcpy(p, kMagic, 8);
  PutU32(p + 8, h.version);
  PutU32(p + 12, h.header_size);
  PutU64(p + 16, h.file_size);
  PutU64(p + 24, h.table_offset);
  PutU32(p + 32, h.section_count);
  PutU32(p + 36, h.entry_size);
  PutU32(p + kTableCrcAt, h.table_crc);
  // The header CRC is SealHeader's, once the rest is written.
}

// The header's CRC32C over its bytes before kHeaderCrcAt, and where it is kept.
inline uint32_t HeaderCrc(const uint8_t* p) { return Crc32c(p, kHeaderCrcAt); }
inline void SealHeader(uint8_t* p) { PutU32(p + kHeaderCrcAt, HeaderCrc(p)); }
inline bool HeaderSealed(const uint8_t* p) { return GetU32(p + kHeaderCrcAt) == HeaderCrc(p); }

inline Header DecodeHeader(const uint8_t* p) {
  Header h;
  h.version = GetU32(p + 8);
  h.header_size = GetU32(p + 12);
  h.file_size = GetU64(p + 16);
  h.table_offset = GetU64(p + 24);
  h.section_count = GetU32(p + 32);
  h.entry_size = GetU32(p + 36);
  h.table_crc = GetU32(p + kTableCrcAt);
  return h;
}

inline void EncodeEntry(const Entry& e, uint8_t* p) {
  std::memset(p, 0, kEntrySize);
  std::memcpy(p, e.name.data(), std::min<size_t>(e.name.size(), kNameSize - 1));
  PutU32(p + 64, static_cast<uint32_t>(e.kind));
  PutU32(p + 68, e.dtype);
  PutU32(p + 72, e.rank);
  PutU32(p + kEntryCrcAt, e.crc);
  for (uint32_t d = 0; d < kMaxRank; ++d) PutU64(p + 80 + 8 * d, static_cast<uint64_t>(e.shape[d]));
  PutU64(p + 112, e.offset);
  PutU64(p + 120, e.length);
}

// Reads the raw fields; the reader validates them afterwards. The name stops
// at the first NUL (the reader checks one exists).
inline Entry DecodeEntry(const uint8_t* p) {
  Entry e;
  e.name.assign(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), kNameSize));
  e.kind = static_cast<SectionKind>(GetU32(p + 64));
  e.dtype = GetU32(p + 68);
  e.rank = GetU32(p + 72);
  e.crc = GetU32(p + kEntryCrcAt);
  for (uint32_t d = 0; d < kMaxRank; ++d) e.shape[d] = static_cast<int64_t>(GetU64(p + 80 + 8 * d));
  e.offset = GetU64(p + 112);
  e.length = GetU64(p + 120);
  return e;
}

}  // namespace bertrt::plan

#include "bertrt/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/files.h"
#include "core/json_util.h"

namespace bertrt {

namespace {

// The reference implementation refuses headers above 100 MB; so do we, which
// also bounds the memory a hostile header can make the JSON parser allocate.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

bool ParseDType(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F64", DType::kF64}, {"F32", DType::kF32},  {"F16", DType::kF16}, {"BF16", DType::kBF16},
      {"I64", DType::kI64}, {"I32", DType::kI32},  {"I16", DType::kI16}, {"I8", DType::kI8},
      {"U8", DType::kU8},   {"BOOL", DType::kBool}};
  for (const auto& [name, dtype] : kNames) {
    if (s == name) {
      *out = dtype;
      return true;
    }
  }
  return false;
}

bool GetU64(const nlohmann::json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) {
    // nlohmann stores non-negative literals as unsigned; anything else (negative,
    // fractional) is not a valid size or offset.
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      *out = static_cast<uint64_t>(v.get<int64_t>());
      return true;
    }
    return false;
  }
  *out = v.get<uint64_t>();
  return true;
}

class EntryParser {
 public:
  EntryParser(const std::string& file, const std::string& name) : file_(file), name_(name) {}

  Status Parse(const nlohmann::json& v, uint64_t data_size, SafetensorsEntry* e) const {
    if (!v.is_object()) return Bad("header entry is not an object");
    auto dtype_it = v.find("dtype");
    auto shape_it = v.find("shape");
    auto offsets_it = v.find("data_offsets");
    if (dtype_it == v.end() || shape_it == v.end() || offsets_it == v.end())
      return Bad("header entry needs \"dtype\", \"shape\" and \"data_offsets\"");
    if (!dtype_it->is_string()) return Bad("\"dtype\" is not a string");
    const std::string dtype = dtype_it->get<std::string>();
    if (!ParseDType(dtype, &e->dtype))
      return Status(StatusCode::kUnimplemented,
                    Prefix() + "unsupported dtype \"" + dtype.substr(0, 32) + "\"");

    if (!shape_it->is_array()) return Bad("\"shape\" is not an array");
    // numel must fit in int64 (Tensor::numel) and numel * element size in uint64.
    const uint64_t limit =
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / DTypeSize(e->dtype);
    uint64_t numel = 1;
    e->shape.clear();
    for (const nlohmann::json& d : *shape_it) {
      uint64_t dim = 0;
      if (!GetU64(d, &dim))
        return Bad("shape dimension " + d.dump().substr(0, 32) + " is not a non-negative integer");
      if (dim > limit || (dim != 0 && numel > limit / dim))
        return Bad("shape " + shape_it->dump().substr(0, 80) + " has too many elements");
      numel *= dim;
      e->shape.push_back(static_cast<int64_t>(dim));
    }

    if (!offsets_it->is_array() || offsets_it->size() != 2 ||
        !GetU64((*offsets_it)[0], &e->begin) || !GetU64((*offsets_it)[1], &e->end))
      return Bad("\"data_offsets\" must be [begin, end] with non-negative integers");
    if (e->end < e->begin)
      return Bad("data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                 "] end before begin");
    if (e->end > data_size)
      return Status(StatusCode::kOutOfRange,
                    Prefix() + "data_offsets [" + std::to_string(e->begin) + ", " +
                        std::to_string(e->end) + "] outside the data section of " +
                        std::to_string(data_size) + " bytes (file truncated?)");
    const uint64_t expected = numel * DTypeSize(e->dtype);
    if (e->end - e->begin != expected)
      return Bad("data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                 "] span " + std::to_string(e->end - e->begin) + " bytes but " + dtype + " " +
                 ShapeToString(e->shape) + " needs " + std::to_string(expected));
    e->name = name_;
    return Status::Ok();
  }

 private:
  std::string Prefix() const { return file_ + ": tensor \"" + name_ + "\": "; }
  Status Bad(const std::string& what) const { return DataLoss(Prefix() + what); }

  const std::string& file_;
  const std::string& name_;
};

Status ParseMetadata(const nlohmann::json& v, const std::string& file,
                     std::map<std::string, std::string>* out) {
  if (!v.is_object()) return DataLoss(file + ": \"__metadata__\" is not an object");
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string())
      return DataLoss(file + ": \"__metadata__\" value of \"" + key + "\" is not a string");
    (*out)[key] = value.get<std::string>();
  }
  return Status::Ok();
}

// Tensors must tile the data section exactly, as the reference reader demands:
// overlaps would alias weights, gaps hide junk.
Status CheckLayout(std::vector<SafetensorsEntry>& entries, uint64_t data_size,
                   const std::string& file) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : entries) {
    if (e.begin < pos)
      return DataLoss(file + ": tensor \"" + e.name + "\" bytes [" + std::to_string(e.begin) +
                      ", " + std::to_string(e.end) + ") overlap tensor \"" + prev->name + "\" [" +
                      std::to_string(prev->begin) + ", " + std::to_string(prev->end) + ")");
    if (e.begin > pos)
      return DataLoss(file + ": " + std::to_string(e.begin - pos) +
                      " unclaimed bytes in the data section before tensor \"" + e.name +
                      "\" at offset " + std::to_string(pos));
    pos = e.end;
    prev = &e;
  }
  if (pos != data_size)
    return DataLoss(file + ": data section is " + std::to_string(data_size) +
                    " bytes but the tensors cover only " + std::to_string(pos) +
                    " (trailing bytes or missing header entries)");
  return Status::Ok();
}

}  // namespace

StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::string_view bytes,
                                                 std::shared_ptr<const void> owner,
                                                 std::string display_name) {
  if (bytes.size() < 8)
    return DataLoss(display_name + ": " + std::to_string(bytes.size()) +
                    " bytes is too short for a safetensors file (needs an 8-byte header length)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  if (header_len > kMaxHeaderBytes)
    return DataLoss(display_name + ": header length " + std::to_string(header_len) +
                    " exceeds the 100 MB limit; not a safetensors file?");
  if (header_len > bytes.size() - 8)
    return DataLoss(display_name + ": header length " + std::to_string(header_len) +
                    " is larger than the " + std::to_string(bytes.size() - 8) +
                    " bytes after it (file truncated?)");

  const std::string_view header_text = bytes.substr(8, header_len);
  ASSIGN_OR_RETURN(nlohmann::json header,
                   ParseJson(header_text, display_name + " (header)"));
  if (!header.is_object())
    return DataLoss(display_name + ": header is JSON " + header.type_name() +
                    ", expected an object of tensors");

  SafetensorsFile file;
  file.path_ = std::move(display_name);
  const uint64_t data_size = bytes.size() - 8 - header_len;
  try {
    for (const auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        RETURN_IF_ERROR(ParseMetadata(value, file.path_, &file.metadata_));
        continue;
      }
      SafetensorsEntry entry;
      RETURN_IF_ERROR(EntryParser(file.path_, key).Parse(value, data_size, &entry));
      file.entries_.push_back(std::move(entry));
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(file.path_ + ": malformed header: " + e.what());
  }
  RETURN_IF_ERROR(CheckLayout(file.entries_, data_size, file.path_));
  for (size_t i = 0; i < file.entries_.size(); ++i) file.index_[file.entries_[i].name] = i;
  file.data_ = reinterpret_cast<const uint8_t*>(bytes.data()) + 8 + header_len;
  file.owner_ = std::move(owner);
  return file;
}

// Read into memory of our own rather than mapped (ReadRegularFileIntoMemory
// says why): fp32 tensors are views of it, served as they are.
StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(FileBytes file, ReadRegularFileIntoMemory(path));
  if (file.bytes.size() < 8)
    return DataLoss(path + ": " + std::to_string(file.bytes.size()) +
                    " bytes is too short for a safetensors file");
  return Parse(file.bytes, std::move(file.owner), path);
}

const SafetensorsEntry* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Tensor SafetensorsFile::View(const SafetensorsEntry& entry) const {
  return Tensor(entry.dtype, entry.shape, data_ + entry.begin, owner_);
}

}  // namespace bertrt

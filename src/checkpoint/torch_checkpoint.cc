#include "checkpoint/torch_checkpoint.h"

#include <unistd.h>
#include <zip.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "core/files.h"
#include "checkpoint/torch_pickle.h"

namespace bertrt::checkpoint {
namespace {

// The legacy format's first pickle: 0x1950a86a20f9469cfc6c as the
// little-endian bytes LONG1 stores it in.
constexpr unsigned char kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr int64_t kLegacyProtocol = 1001;

// A storage's bytes, kept alive by `owner`.
struct StorageBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

Status StorageNBytes(const TorchStorageRef& s, const std::string& where, size_t* out) {
  if (__builtin_mul_overflow(static_cast<uint64_t>(s.numel), DTypeSize(s.dtype), out))
    return DataLoss(where + ": storage " + s.key.substr(0, 64) + " is too large");
  return Status::Ok();
}

// Each recipe as a contiguous tensor: a view of its storage when its strides
// are row-major, else a copy gathered element by element.
StatusOr<std::vector<CheckpointTensor>> BuildTensors(
    const TorchStateDict& dict, const std::map<std::string, StorageBytes>& storages,
    const std::string& file) {
  std::vector<CheckpointTensor> out;
  for (const TorchTensorRecipe& r : dict.tensors) {
    auto it = storages.find(r.storage.key);
    if (it == storages.end())
      return DataLoss(file + ": tensor " + r.name + "'s storage " + r.storage.key.substr(0, 64) +
                      " is not in the file");
    const size_t es = DTypeSize(r.storage.dtype);
    const uint8_t* base = it->second.data;
    // The pickle checked offset, size and stride against the storage's
    // declared size; the bytes here were checked to hold that many.
    bool contiguous = true;
    int64_t expected = 1, numel = 1;
    for (size_t d = r.size.size(); d-- > 0;) {
      if (r.size[d] != 1 && r.stride[d] != expected) contiguous = false;
      expected *= r.size[d];
      numel *= r.size[d];
    }
    CheckpointTensor t;
    t.name = r.name;
    t.file = file;
    if (contiguous || numel == 0) {
      t.data = Tensor(r.storage.dtype, r.size, base + static_cast<size_t>(r.offset) * es,
                      it->second.owner);
    } else {
      auto copy = std::make_shared<std::string>(static_cast<size_t>(numel) * es, '\0');
      std::vector<int64_t> index(r.size.size(), 0);
      for (int64_t n = 0; n < numel; ++n) {
        int64_t src = r.offset;
        for (size_t d = 0; d < index.size(); ++d) src += index[d] * r.stride[d];
        std::memcpy(copy->data() + static_cast<size_t>(n) * es, base + static_cast<size_t>(src) * es, es);
        for (size_t d = index.size(); d-- > 0;) {  // next index, row-major
          if (++index[d] < r.size[d]) break;
          index[d] = 0;
        }
      }
      t.data = Tensor(r.storage.dtype, r.size, copy->data(), copy);
    }
    out.push_back(std::move(t));
  }
  return out;
}

// --- the zip format ---------------------------------------------------------

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipCloser>;

class ZipReader {
 public:
  ZipReader(zip_t* zip, uint64_t file_size, std::string where)
      : zip_(zip), file_size_(file_size), where_(std::move(where)) {}

  // The record `name`, read whole. Records must be stored, as torch.save
  // writes them, so none is larger than the file; and all of them together
  // are no larger than the file either (a hostile zip's records may overlap).
  Status Read(const std::string& name, StorageBytes* out) {
    const zip_int64_t index = zip_name_locate(zip_.get(), name.c_str(), ZIP_FL_ENC_RAW);
    if (index < 0) return DataLoss(where_ + ": has no record " + name.substr(0, 200));
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(zip_.get(), static_cast<zip_uint64_t>(index), 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD))
      return DataLoss(where_ + ": record " + name.substr(0, 200) + " has no size");
    if (st.comp_method != ZIP_CM_STORE)
      return Unimplemented(where_ + ": record " + name.substr(0, 200) +
                           " is compressed; torch.save stores records uncompressed, so this file "
                           "was re-packed: save it again with torch.save");
    if (st.size > file_size_ || total_ + st.size > file_size_)
      return DataLoss(where_ + ": its records claim more bytes than the file has");
    total_ += st.size;
    zip_file_t* f = zip_fopen_index(zip_.get(), static_cast<zip_uint64_t>(index), 0);
    if (!f) return DataLoss(where_ + ": cannot open record " + name.substr(0, 200) + ": " +
                            zip_strerror(zip_.get()));
    auto buffer = std::make_shared<std::string>(st.size, '\0');
    uint64_t done = 0;
    while (done < st.size) {
      const zip_int64_t n = zip_fread(f, buffer->data() + done, st.size - done);
      if (n <= 0) break;
      done += static_cast<uint64_t>(n);
    }
    // Reading to the end makes libzip check the record's CRC-32.
    char extra;
    const zip_int64_t tail = done == st.size ? zip_fread(f, &extra, 1) : -1;
    std::string error = zip_file_strerror(f);
    zip_fclose(f);
    if (done != st.size || tail != 0)
      return DataLoss(where_ + ": record " + name.substr(0, 200) + " is damaged: " + error);
    out->data = reinterpret_cast<const uint8_t*>(buffer->data());
    out->size = buffer->size();
    out->owner = std::move(buffer);
    return Status::Ok();
  }

  // The archive's folder: "archive/" of "archive/data.pkl".
  StatusOr<std::string> Prefix() const {
    const zip_int64_t n = zip_get_num_entries(zip_.get(), 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      const char* name = zip_get_name(zip_.get(), static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
      if (!name) continue;
      const std::string_view s(name);
      const std::string_view pkl = "data.pkl";
      if (s.size() >= pkl.size() && s.substr(s.size() - pkl.size()) == pkl &&
          s.find('/') == s.size() - pkl.size() - 1)
        return std::string(s.substr(0, s.size() - pkl.size()));
    }
    return DataLoss(where_ + ": a zip without the data.pkl of torch.save; is this a PyTorch "
                             "checkpoint?");
  }

  bool Has(const std::string& name) const {
    return zip_name_locate(zip_.get(), name.c_str(), ZIP_FL_ENC_RAW) >= 0;
  }

 private:
  ZipPtr zip_;
  uint64_t file_size_;
  std::string where_;
  uint64_t total_ = 0;
};

StatusOr<TorchCheckpoint> ReadZip(ZipReader& zip, const std::string& where, const std::string& file) {
  ASSIGN_OR_RETURN(const std::string prefix, zip.Prefix());
  if (zip.Has(prefix + "byteorder")) {
    StorageBytes order;
    RETURN_IF_ERROR(zip.Read(prefix + "byteorder", &order));
    if (std::string_view(reinterpret_cast<const char*>(order.data), order.size) != "little")
      return Unimplemented(where + ": saved on a big-endian machine; bertrt reads little-endian "
                                   "checkpoints");
  }
  StorageBytes pkl;
  RETURN_IF_ERROR(zip.Read(prefix + "data.pkl", &pkl));
  ASSIGN_OR_RETURN(TorchStateDict dict,
                   ReadTorchStateDictPickle(std::string_view(reinterpret_cast<const char*>(pkl.data),
                                                             pkl.size),
                                            where + " (data.pkl)"));
  std::map<std::string, StorageBytes> storages;
  for (const TorchStorageRef& s : dict.storages) {
    // Keys become record names: they must name a record in data/, nothing else.
    if (s.key.empty() || s.key.find('/') != std::string::npos || s.key == "." || s.key == "..")
      return DataLoss(where + ": storage key \"" + s.key.substr(0, 64) + "\" is not a record name");
    StorageBytes bytes;
    RETURN_IF_ERROR(zip.Read(prefix + "data/" + s.key, &bytes));
    size_t need;
    RETURN_IF_ERROR(StorageNBytes(s, where, &need));
    if (bytes.size < need)
      return DataLoss(where + ": storage " + s.key.substr(0, 64) + " holds " +
                      std::to_string(bytes.size) + " bytes; its tensors need " + std::to_string(need));
    storages[s.key] = std::move(bytes);
  }
  ASSIGN_OR_RETURN(auto tensors, BuildTensors(dict, storages, file));
  return TorchCheckpoint{std::move(tensors), "zip"};
}

// --- the legacy format ------------------------------------------------------

StatusOr<TorchCheckpoint> ReadLegacy(std::string_view bytes, const std::shared_ptr<const void>& owner,
                                     const std::string& where, const std::string& file) {
  size_t pos = 0, used = 0;
  ASSIGN_OR_RETURN(PickleScalar magic, ReadPlainPickle(bytes, where, &used));
  pos += used;
  if (magic.kind != PickleScalar::Kind::kBigInt ||
      magic.s != std::string(reinterpret_cast<const char*>(kLegacyMagic), sizeof kLegacyMagic))
    return DataLoss(where + ": starts with a pickle but not torch.save's magic number; is this a "
                            "PyTorch checkpoint?");
  ASSIGN_OR_RETURN(PickleScalar protocol, ReadPlainPickle(bytes.substr(pos), where, &used));
  pos += used;
  if (protocol.kind != PickleScalar::Kind::kInt || protocol.i != kLegacyProtocol)
    return Unimplemented(where + ": legacy torch.save protocol " +
                         (protocol.kind == PickleScalar::Kind::kInt ? std::to_string(protocol.i)
                                                                    : std::string("?")) +
                         "; bertrt reads protocol 1001");
  ASSIGN_OR_RETURN(PickleScalar sys_info, ReadPlainPickle(bytes.substr(pos), where, &used));
  pos += used;
  for (size_t i = 0; i < sys_info.keys.size(); ++i)
    if (sys_info.keys[i].s == "little_endian" && sys_info.values[i].kind == PickleScalar::Kind::kBool &&
        !sys_info.values[i].i)
      return Unimplemented(where + ": saved on a big-endian machine; bertrt reads little-endian "
                                   "checkpoints");
  ASSIGN_OR_RETURN(TorchStateDict dict, ReadTorchStateDictPickle(bytes.substr(pos), where, &used));
  pos += used;
  ASSIGN_OR_RETURN(PickleScalar keys, ReadPlainPickle(bytes.substr(pos), where, &used));
  pos += used;
  if (keys.kind != PickleScalar::Kind::kList)
    return DataLoss(where + ": the list of storage keys is missing");

  std::map<std::string, const TorchStorageRef*> named;
  for (const TorchStorageRef& s : dict.storages) named[s.key] = &s;
  std::map<std::string, StorageBytes> storages;
  // Each storage: its element count (int64, little-endian), then its bytes.
  for (const PickleScalar& key : keys.items) {
    auto it = named.find(key.s);
    if (key.kind != PickleScalar::Kind::kString || it == named.end())
      return DataLoss(where + ": storage key \"" + key.s.substr(0, 64) + "\" names no storage");
    if (storages.count(key.s)) return DataLoss(where + ": storage " + key.s.substr(0, 64) + " twice");
    if (bytes.size() - pos < 8) return DataLoss(where + ": ends before storage " + key.s.substr(0, 64));
    int64_t count;
    std::memcpy(&count, bytes.data() + pos, 8);
    pos += 8;
    if (count != it->second->numel)
      return DataLoss(where + ": storage " + key.s.substr(0, 64) + " has " + std::to_string(count) +
                      " elements; the pickle said " + std::to_string(it->second->numel));
    size_t need;
    RETURN_IF_ERROR(StorageNBytes(*it->second, where, &need));
    if (bytes.size() - pos < need)
      return DataLoss(where + ": ends inside storage " + key.s.substr(0, 64));
    storages[key.s] = {reinterpret_cast<const uint8_t*>(bytes.data() + pos), need, owner};
    pos += need;
  }
  ASSIGN_OR_RETURN(auto tensors, BuildTensors(dict, storages, file));
  return TorchCheckpoint{std::move(tensors), "legacy"};
}

bool IsZip(std::string_view head) { return head.substr(0, 4) == std::string_view("PK\x03\x04", 4); }

Status NotTorch(std::string_view head, const std::string& where) {
  // torch.save before PyTorch 0.4 wrote a tar archive.
  if (head.size() >= 262 && head.substr(257, 5) == "ustar")
    return Unimplemented(where + ": a tar archive, the format of torch.save before PyTorch 0.4; "
                                 "load and save it again with a newer PyTorch");
  return DataLoss(where + ": neither torch.save's zip format nor its legacy format; is this a "
                          "PyTorch checkpoint?");
}

}  // namespace

StatusOr<TorchCheckpoint> ReadTorchCheckpoint(const std::string& path) {
  const std::string file = std::filesystem::path(path).filename().string();
  ASSIGN_OR_RETURN(RegularFile f, OpenRegularFile(path));
  char head[512] = {};
  const ssize_t got = pread(f.fd, head, sizeof head, 0);
  const std::string_view h(head, got > 0 ? static_cast<size_t>(got) : 0);
  if (IsZip(h)) {
    int err = 0;
    zip_t* z = zip_fdopen(f.fd, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!z) {
      close(f.fd);
      zip_error_t e;
      zip_error_init_with_code(&e, err);
      std::string msg = path + ": a damaged zip: " + zip_error_strerror(&e);
      zip_error_fini(&e);
      return DataLoss(msg);
    }
    ZipReader zip(z, f.size, path);  // owns the descriptor now
    return ReadZip(zip, path, file);
  }
  close(f.fd);
  if (h.empty() || static_cast<uint8_t>(h[0]) != 0x80) return NotTorch(h, path);
  ASSIGN_OR_RETURN(FileBytes bytes, ReadRegularFileIntoMemory(path));
  return ReadLegacy(bytes.bytes, bytes.owner, path, file);
}

StatusOr<TorchCheckpoint> ParseTorchCheckpoint(std::string_view bytes,
                                               std::shared_ptr<const void> owner,
                                               const std::string& display_name) {
  if (IsZip(bytes)) {
    zip_error_t e;
    zip_error_init(&e);
    zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &e);
    zip_t* z = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &e) : nullptr;
    if (!z) {
      if (src) zip_source_free(src);
      std::string msg = display_name + ": a damaged zip: " + zip_error_strerror(&e);
      zip_error_fini(&e);
      return DataLoss(msg);
    }
    zip_error_fini(&e);
    ZipReader zip(z, bytes.size(), display_name);
    return ReadZip(zip, display_name, display_name);
  }
  if (bytes.empty() || static_cast<uint8_t>(bytes[0]) != 0x80) return NotTorch(bytes, display_name);
  return ReadLegacy(bytes, owner, display_name, display_name);
}

}  // namespace bertrt::checkpoint

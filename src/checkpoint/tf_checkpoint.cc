#include "checkpoint/tf_checkpoint.h"

#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/crc32c.h"
#include "core/files.h"
#include "core/json_util.h"
#include "tf_bundle.pb.h"

namespace bertrt::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;  // leveldb's, kept by TensorFlow
constexpr size_t kFooterSize = 48;
constexpr size_t kBlockTrailerSize = 5;  // compression type, masked CRC32C
constexpr int kMaxShards = 100000;

uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

uint32_t GetFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// A little-endian base-128 varint of at most `max_bytes` bytes.
bool GetVarint(std::string_view* in, uint64_t* out, int max_bytes = 10) {
  uint64_t v = 0;
  for (int i = 0; i < max_bytes && i < static_cast<int>(in->size()); ++i) {
    const uint8_t b = static_cast<uint8_t>((*in)[i]);
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      in->remove_prefix(i + 1);
      *out = v;
      return true;
    }
  }
  return false;
}

struct BlockHandle {
  uint64_t offset = 0, size = 0;
};

bool GetHandle(std::string_view* in, BlockHandle* h) {
  return GetVarint(in, &h->offset) && GetVarint(in, &h->size);
}

class TableReader {
 public:
  TableReader(std::string_view file, std::string where) : file_(file), where_(std::move(where)) {}

  Status Bad(const std::string& what) const { return DataLoss(where_ + ": " + what); }

  // A block's contents, its trailer checked.
  Status Block(const BlockHandle& h, std::string_view* out) const {
    if (h.offset > file_.size() || h.size > file_.size() - h.offset ||
        kBlockTrailerSize > file_.size() - h.offset - h.size)
      return Bad("a block lies outside the file");
    const char* data = file_.data() + h.offset;
    const uint8_t type = static_cast<uint8_t>(data[h.size]);
    const uint32_t crc = Crc32c(data + h.size, 1, Crc32c(data, h.size));
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // see CMakeLists.txt
    if (UnmaskCrc(GetFixed32(data + h.size + 1)) != crc) return Bad("a block's CRC32C does not match");
#else
    (void)crc;
#endif
    if (type != 0)
      return Unimplemented(where_ + ": compressed index blocks (type " + std::to_string(type) +
                           "); TensorFlow writes checkpoint indexes uncompressed");
    *out = std::string_view(data, h.size);
    return Status::Ok();
  }

  // Every entry of a block, keys rebuilt from their shared prefixes.
  Status Entries(std::string_view block, std::vector<std::pair<std::string, std::string>>* out) const {
    if (block.size() < 4) return Bad("a block too short for its restart count");
    const uint64_t restarts = GetFixed32(block.data() + block.size() - 4);
    if (restarts > (block.size() - 4) / 4) return Bad("a block's restart count is larger than the block");
    std::string_view in = block.substr(0, block.size() - 4 - 4 * restarts);
    std::string key;
    while (!in.empty()) {
      uint64_t shared, unshared, value_size;
      if (!GetVarint(&in, &shared, 5) || !GetVarint(&in, &unshared, 5) || !GetVarint(&in, &value_size, 5))
        return Bad("a block entry's lengths are cut short");
      if (shared > key.size() || unshared > in.size() || value_size > in.size() - unshared)
        return Bad("a block entry is longer than its block");
      key.resize(shared);
      key.append(in.data(), unshared);
      out->emplace_back(key, std::string(in.substr(unshared, value_size)));
      in.remove_prefix(unshared + value_size);
    }
    return Status::Ok();
  }

  Status All(std::vector<std::pair<std::string, std::string>>* out) const {
    if (file_.size() < kFooterSize) return Bad("too short for a checkpoint index");
    std::string_view footer = file_.substr(file_.size() - kFooterSize);
    uint64_t magic;
    std::memcpy(&magic, footer.data() + kFooterSize - 8, 8);
    if (magic != kTableMagic) return Bad("not a TensorFlow checkpoint index (no table magic number)");
    BlockHandle meta, index;
    if (!GetHandle(&footer, &meta) || !GetHandle(&footer, &index)) return Bad("a damaged footer");
    std::string_view index_block;
    RETURN_IF_ERROR(Block(index, &index_block));
    std::vector<std::pair<std::string, std::string>> handles;
    RETURN_IF_ERROR(Entries(index_block, &handles));
    for (const auto& [last_key, value] : handles) {
      std::string_view v = value;
      BlockHandle h;
      if (!GetHandle(&v, &h)) return Bad("a damaged index entry");
      std::string_view block;
      RETURN_IF_ERROR(Block(h, &block));
      RETURN_IF_ERROR(Entries(block, out));
    }
    return Status::Ok();
  }

 private:
  std::string_view file_;
  std::string where_;
};

bool TfDType(int dtype, DType* out) {
  switch (dtype) {
    case 1: *out = DType::kF32; return true;
    case 2: *out = DType::kF64; return true;
    case 3: *out = DType::kI32; return true;
    case 9: *out = DType::kI64; return true;
    case 14: *out = DType::kBF16; return true;
    case 19: *out = DType::kF16; return true;
    default: return false;
  }
}

std::string ShardPath(const std::string& prefix, int shard, int shards) {
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".data-%05d-of-%05d", shard, shards);
  return prefix + suffix;
}

// The quoted path after `model_checkpoint_path:` in a `checkpoint` file.
std::string CheckpointFilePath(const std::string& text) {
  const std::string key = "model_checkpoint_path:";
  size_t at = text.find(key);
  while (at != std::string::npos && at > 0 && text[at - 1] != '\n') at = text.find(key, at + 1);
  if (at == std::string::npos) return "";
  const size_t open = text.find('"', at);
  const size_t close = open == std::string::npos ? open : text.find('"', open + 1);
  return close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

}  // namespace

bool IsTfTrainingVariable(const std::string& name) {
  for (const char* m : {"/adam_m", "/adam_v", "/Adam", "/Momentum", "/ExponentialMovingAverage",
                        "/Adagrad", "/RMSProp", "/LAMB", "/lamb_m", "/lamb_v"})
    if (name.find(m) != std::string::npos) return true;
  return name == "global_step" || name.rfind("global_step", 0) == 0 || name.rfind("loss_scale", 0) == 0 ||
         name.rfind("good_steps", 0) == 0 || name.rfind("current_loss_scale", 0) == 0;
}

std::string HfNameOfTfVariable(const std::string& name, bool* transpose) {
  *transpose = false;
  // The task heads of Google's scripts: run_classifier.py's (and the NER
  // scripts built on it) and run_squad.py's.
  if (name == "output_weights") return "classifier.weight";
  if (name == "output_bias") return "classifier.bias";
  if (name == "cls/squad/output_weights") return "qa_outputs.weight";
  if (name == "cls/squad/output_bias") return "qa_outputs.bias";
  if (name == "cls/predictions/output_bias") return "cls.predictions.bias";
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string p = parts[i];
    if (p.rfind("layer_", 0) == 0 && p.size() > 6 &&
        p.find_first_not_of("0123456789", 6) == std::string::npos)
      p = "layer." + p.substr(6);
    const bool last = i + 1 == parts.size();
    if (last && p == "kernel") {
      p = "weight";
      *transpose = true;
    } else if (last && p == "gamma") {
      p = "weight";
    } else if (last && p == "beta") {
      p = "bias";
    } else if (last && (p == "word_embeddings" || p == "position_embeddings" ||
                        p == "token_type_embeddings")) {
      p += ".weight";  // embedding tables are variables with no suffix of their own
    }
    out += (i ? "." : "") + p;
  }
  return out;
}

StatusOr<nlohmann::json> HfConfigFromBertConfig(const nlohmann::json& bert_config,
                                                const std::string& path, const Checkpoint& ckpt,
                                                const NoticeFn& notice) {
  if (!bert_config.is_object()) return InvalidArgument(path + ": not a JSON object");
  nlohmann::json c = bert_config;
  c["model_type"] = "bert";
  auto act = c.find("hidden_act");
  if (act != c.end() && *act == "gelu") {
    c["hidden_act"] = "gelu_new";
    if (notice)
      notice("inferred: " + path +
             ": hidden_act \"gelu\" is Google BERT's tanh approximation (modeling.py), run as "
             "gelu_new; for the erf form write a config.json with \"gelu\"");
  }
  const CheckpointTensor* classifier = ckpt.Find("classifier.weight");
  if (ckpt.Find("qa_outputs.weight")) {
    c["architectures"] = {"BertForQuestionAnswering"};
    if (notice) notice("inferred: a question-answering head, from cls/squad/output_weights");
  } else if (classifier && classifier->data.rank() == 2) {
    c["architectures"] = {"BertForSequenceClassification"};
    const int64_t labels = classifier->data.dim(0);
    const std::string labels_path = JoinPath(fs::path(path).parent_path().string(), "labels.txt");
    nlohmann::json id2label = nlohmann::json::object();
    if (fs::exists(labels_path)) {
      ASSIGN_OR_RETURN(const std::vector<std::string> names, ReadLabelsFile(labels_path));
      if (static_cast<int64_t>(names.size()) != labels)
        return InvalidArgument(labels_path + ": " + std::to_string(names.size()) +
                               " labels, but output_weights has " + std::to_string(labels) +
                               " rows; one label per line, in the classifier's order");
      for (size_t i = 0; i < names.size(); ++i) id2label[std::to_string(i)] = names[i];
    } else {
      for (int64_t i = 0; i < labels; ++i) id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    }
    c["id2label"] = id2label;
    if (notice)
      notice("inferred: a sequence-classification head with " + std::to_string(labels) +
             " labels, from output_weights" +
             (fs::exists(labels_path) ? ", named by labels.txt"
                                      : "; name them with --labels or a labels.txt beside the "
                                        "checkpoint (one per line)"));
  } else {
    c["architectures"] = {"BertModel"};
    if (notice) notice("inferred: no task head (BertModel): no output_weights or cls/squad variables");
  }
  return c;
}

StatusOr<std::string> FindTfCheckpoint(const std::string& dir) {
  const std::string checkpoint_file = JoinPath(dir, "checkpoint");
  if (fs::exists(checkpoint_file)) {
    ASSIGN_OR_RETURN(std::string text, ReadRegularFile(checkpoint_file));
    const std::string named = CheckpointFilePath(text);
    if (!named.empty()) {
      // Training often ran elsewhere (another machine, gs://): the name
      // counts, the directory is this one.
      const std::string prefix = JoinPath(dir, fs::path(named).filename().string());
      if (!fs::exists(prefix + ".index"))
        return NotFound(checkpoint_file + " names " + named + ", but " + prefix +
                        ".index is not there");
      return prefix;
    }
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".index") == 0 &&
        name.find(".safetensors") == std::string::npos && name.find(".bin") == std::string::npos)
      found.push_back(name.substr(0, name.size() - 6));
  }
  if (found.empty()) return std::string();
  if (found.size() > 1)
    return InvalidArgument(dir + ": holds " + std::to_string(found.size()) +
                           " TensorFlow checkpoints and no `checkpoint` file naming one; keep one, "
                           "or write `model_checkpoint_path: \"" + found[0] + "\"` into " +
                           checkpoint_file);
  return JoinPath(dir, found[0]);
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ReadSstable(std::string_view bytes,
                                                                       const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  RETURN_IF_ERROR(TableReader(bytes, where).All(&out));
  return out;
}

StatusOr<TfCheckpoint> ReadTfCheckpoint(const std::string& prefix) {
  const std::string index_path = prefix + ".index";
  ASSIGN_OR_RETURN(std::string index_bytes, ReadRegularFile(index_path));
  ASSIGN_OR_RETURN(auto entries, ReadSstable(index_bytes, index_path));
  if (entries.empty() || !entries[0].first.empty())
    return DataLoss(index_path + ": no bundle header (the entry under the empty key)");
  tf::BundleHeader header;
  if (!header.ParseFromString(entries[0].second)) return DataLoss(index_path + ": a damaged bundle header");
  if (header.endianness() != tf::BundleHeader::LITTLE)
    return Unimplemented(index_path + ": written on a big-endian machine");
  if (header.num_shards() < 1 || header.num_shards() > kMaxShards)
    return DataLoss(index_path + ": " + std::to_string(header.num_shards()) + " data shards");

  // Each shard opened once; every byte read counted against the shards' sizes
  // (entries of a damaged or hostile index may overlap).
  std::map<int, RegularFile> shards;
  std::deque<FdCloser> closers;  // FdCloser does not move; a deque need not move it
  uint64_t shard_bytes = 0, read_bytes = 0;
  const std::string file_prefix = fs::path(prefix).filename().string();

  TfCheckpoint out;
  out.files.push_back(index_path);
  for (size_t i = 1; i < entries.size(); ++i) {
    const std::string& name = entries[i].first;
    tf::BundleEntry e;
    if (!e.ParseFromString(entries[i].second))
      return DataLoss(index_path + ": a damaged entry for " + name.substr(0, 200));
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (const auto& d : e.shape().dim()) {
      if (d.size() < 0 || (d.size() > 0 && numel > (int64_t{1} << 48) / d.size()))
        return DataLoss(index_path + ": " + name.substr(0, 200) + " has a bad shape");
      shape.push_back(d.size());
      numel *= d.size();
    }
    DType dtype;
    const bool readable = TfDType(e.dtype(), &dtype) && e.slices_size() == 0 && !e.shape().unknown_rank();
    if (IsTfTrainingVariable(name)) {
      out.tensors.push_back({name, Tensor(), file_prefix});  // named in the notice, never read
      continue;
    }
    if (!readable)
      return Unimplemented(index_path + ": variable " + name.substr(0, 200) +
                           (e.slices_size() ? " is partitioned" : " has TensorFlow dtype " +
                                                                      std::to_string(e.dtype())) +
                           ", which bertrt does not read");
    const uint64_t nbytes = static_cast<uint64_t>(numel) * DTypeSize(dtype);
    if (e.size() < 0 || static_cast<uint64_t>(e.size()) != nbytes || e.offset() < 0)
      return DataLoss(index_path + ": " + name.substr(0, 200) + " says " + std::to_string(e.size()) +
                      " bytes for " + ShapeToString(shape));
    if (e.shard_id() < 0 || e.shard_id() >= header.num_shards())
      return DataLoss(index_path + ": " + name.substr(0, 200) + " is in shard " +
                      std::to_string(e.shard_id()) + " of " + std::to_string(header.num_shards()));
    auto it = shards.find(e.shard_id());
    if (it == shards.end()) {
      ASSIGN_OR_RETURN(RegularFile f, OpenRegularFile(ShardPath(prefix, e.shard_id(), header.num_shards())));
      closers.emplace_back(f.fd);
      out.files.push_back(ShardPath(prefix, e.shard_id(), header.num_shards()));
      it = shards.emplace(e.shard_id(), f).first;
      shard_bytes += f.size;
    }
    const RegularFile& shard = it->second;
    if (static_cast<uint64_t>(e.offset()) > shard.size || nbytes > shard.size - e.offset() ||
        (read_bytes += nbytes) > shard_bytes)
      return DataLoss(index_path + ": " + name.substr(0, 200) + " lies outside its data shard");
    auto buffer = std::make_shared<std::string>(nbytes, '\0');
    RETURN_IF_ERROR(ReadFileRange(shard.fd, static_cast<uint64_t>(e.offset()), nbytes, buffer->data(),
                                  ShardPath(prefix, e.shard_id(), header.num_shards())));
    if (UnmaskCrc(e.crc32c()) != Crc32c(buffer->data(), buffer->size()))
      return DataLoss(index_path + ": " + name.substr(0, 200) + "'s bytes do not match its CRC32C");

    bool transpose = false;
    std::string hf_name = HfNameOfTfVariable(name, &transpose);
    Tensor tensor(dtype, shape, buffer->data(), buffer);
    if (transpose && shape.size() == 2) {
      tensor = TransposeMatrix(tensor);
      ++out.transposed;
    }
    out.renamed += hf_name != name;
    out.tensors.push_back({std::move(hf_name), std::move(tensor), file_prefix});
  }
  return out;
}

}  // namespace bertrt::checkpoint

#include "importer/onnx_model.h"

#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "core/files.h"
#include "importer/hf_config.h"
#include "onnx_model.pb.h"

namespace bertrt::importer {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr const char* kQuantized = "_quantized";

// A tensor's bytes, row-major.
struct Data {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::shared_ptr<std::string> bytes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

bool OnnxDType(int type, DType* out) {
  switch (type) {
    case 1: *out = DType::kF32; return true;
    case 2: *out = DType::kU8; return true;
    case 3: *out = DType::kI8; return true;
    case 6: *out = DType::kI32; return true;
    case 7: *out = DType::kI64; return true;
    case 9: *out = DType::kBool; return true;
    case 10: *out = DType::kF16; return true;
    case 11: *out = DType::kF64; return true;
    case 16: *out = DType::kBF16; return true;
    default: return false;
  }
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Ops of onnxruntime's transformer optimizer (optimum -O2 and above), which
// fold several layers' weights into one; bertrt reads plain exports.
bool IsFusedOp(const onnx::Node& n) {
  static const std::set<std::string> kFused = {
      "Attention", "MultiHeadAttention", "QAttention", "SkipLayerNormalization",
      "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization", "BiasGelu", "FastGelu",
      "FusedMatMul", "QOrderedAttention", "GroupQueryAttention", "BiasSplitGelu"};
  return n.domain() == "com.microsoft" || kFused.count(n.op_type());
}

class Reader {
 public:
  Reader(const onnx::Model& model, std::string dir, std::string where)
      : model_(model), dir_(std::move(dir)), where_(std::move(where)) {}

  Status Bad(const std::string& what) const { return DataLoss(where_ + ": " + what); }

  StatusOr<OnnxWeights> Run() {
    const onnx::Graph& g = model_.graph();
    for (const onnx::Tensor& t : g.initializer()) initializers_[t.name()] = &t;
    for (const onnx::Node& n : g.node()) {
      if (IsFusedOp(n))
        return Unimplemented(where_ + ": op " + (n.domain().empty() ? "" : n.domain() + ".") +
                             n.op_type() + " (node " + n.name().substr(0, 100) +
                             ") is a fused op of onnxruntime's transformer optimizer (optimum "
                             "-O2 and above); bertrt reads plain exports: export again without "
                             "it (optimum-cli export onnx --optimize O1, or torch.onnx.export)");
      for (const std::string& out : n.output()) producer_[out] = &n;
      for (const std::string& in : n.input()) consumers_[in].push_back(&n);
    }
    std::map<std::string, CheckpointTensor> out;
    const std::string file = fs::path(where_).filename().string();
    // The Linear layers: MatMul (int8: MatMulInteger) or Gemm with a constant weight.
    for (const onnx::Node& n : g.node()) {
      const bool matmul = n.op_type() == "MatMul" || n.op_type() == "MatMulInteger";
      if (!(matmul || n.op_type() == "Gemm") || n.input_size() < 2) continue;
      std::string weight = n.input(1);
      bool transposed_in_graph = false;
      if (!initializers_.count(weight)) {
        auto p = producer_.find(weight);
        if (p == producer_.end() || p->second->op_type() != "Transpose" ||
            !initializers_.count(p->second->input(0)))
          continue;  // activations times activations: attention's own MatMuls
        weight = p->second->input(0);
        transposed_in_graph = true;
      }
      const std::string bias = n.op_type() == "Gemm" && n.input_size() > 2 ? n.input(2) : BiasAfter(n);
      std::string name;
      if (EndsWith(bias, ".bias") && initializers_.count(bias)) {
        name = bias.substr(0, bias.size() - 5) + ".weight";
      } else {
        const std::string base = Unquantized(weight);
        if (!EndsWith(base, ".weight")) continue;  // no role to give it
        name = base;
      }
      ASSIGN_OR_RETURN(Data w, Resolve(weight));
      if (w.shape.size() != 2) return Bad("the weight of " + name + " is not a matrix");
      // MatMul's weight is [in, out]; Gemm's too unless transB; transformers' is [out, in].
      bool transpose = matmul || !Attribute(n, "transB");
      if (transposed_in_graph) transpose = !transpose;
      Tensor tensor(w.dtype, w.shape, w.bytes->data(), w.bytes);
      used_.insert(weight);
      out[name] = {name, transpose ? TransposeMatrix(tensor) : tensor, file};
    }
    // Every other named parameter as it is (int8 ones dequantized).
    for (const onnx::Tensor& t : g.initializer()) {
      const std::string& name = t.name();
      if (used_.count(name) || name.rfind("onnx::", 0) == 0 || name.find('.') == std::string::npos ||
          EndsWith(name, "_scale") || EndsWith(name, "_zero_point"))
        continue;
      const std::string base = Unquantized(name);
      if (out.count(base)) continue;
      ASSIGN_OR_RETURN(Data d, Resolve(name));
      out[base] = {base, Tensor(d.dtype, d.shape, d.bytes->data(), d.bytes), file};
    }
    OnnxWeights weights;
    for (auto& [name, t] : out) weights.tensors.push_back(std::move(t));
    weights.dequantized = dequantized_;
    return weights;
  }

 private:
  const onnx::Model& model_;
  std::string dir_, where_;
  std::map<std::string, const onnx::Tensor*> initializers_;
  std::map<std::string, const onnx::Node*> producer_;
  std::map<std::string, std::vector<const onnx::Node*>> consumers_;
  std::set<std::string> used_;
  uint64_t external_bytes_ = 0;
  std::map<std::string, uint64_t> external_files_;  // location -> size
  int dequantized_ = 0;

  static int64_t Attribute(const onnx::Node& n, const std::string& name) {
    for (const onnx::Attribute& a : n.attribute())
      if (a.name() == name) return a.i();
    return 0;
  }

  // "X" for an int8 weight "X_quantized" that has its X_scale and X_zero_point.
  std::string Unquantized(const std::string& name) const {
    if (!EndsWith(name, kQuantized)) return name;
    const std::string base = name.substr(0, name.size() - std::strlen(kQuantized));
    return initializers_.count(base + "_scale") && initializers_.count(base + "_zero_point") ? base : name;
  }

  // The bias initializer added to `n`'s output, through the int8 path's Cast
  // and scale Mul: "" when there is none.
  std::string BiasAfter(const onnx::Node& n) const {
    std::string value = n.output_size() ? n.output(0) : "";
    for (int hop = 0; hop < 4; ++hop) {
      auto it = consumers_.find(value);
      if (it == consumers_.end() || it->second.size() != 1) return "";
      const onnx::Node& next = *it->second[0];
      if (next.op_type() == "Add" && next.input_size() == 2) {
        const std::string& other = next.input(0) == value ? next.input(1) : next.input(0);
        return initializers_.count(other) ? other : "";
      }
      if ((next.op_type() != "Cast" && next.op_type() != "Mul") || !next.output_size()) return "";
      value = next.output(0);
    }
    return "";
  }

  // The tensor an initializer holds; an int8 "X_quantized" dequantized with
  // X_scale and X_zero_point (one scale, or one per column of a matrix).
  StatusOr<Data> Resolve(const std::string& name) {
    ASSIGN_OR_RETURN(Data q, Bytes(*initializers_.at(name)));
    const std::string base = Unquantized(name);
    if (base == name) return q;
    ASSIGN_OR_RETURN(Data scale, Bytes(*initializers_.at(base + "_scale")));
    ASSIGN_OR_RETURN(Data zero, Bytes(*initializers_.at(base + "_zero_point")));
    used_.insert(base + "_scale");
    used_.insert(base + "_zero_point");
    if (q.dtype != DType::kI8 && q.dtype != DType::kU8) return Bad(name + " is not int8 or uint8");
    if (scale.dtype != DType::kF32 || zero.dtype != q.dtype || scale.numel() != zero.numel())
      return Bad(base + "'s scale and zero point do not match its int8 weights");
    const int64_t n = q.numel(), groups = scale.numel();
    const int64_t cols = q.shape.size() == 2 ? q.shape[1] : 1;
    if (groups != 1 && !(q.shape.size() == 2 && groups == cols))
      return Unimplemented(where_ + ": " + base + " has " + std::to_string(groups) +
                           " scales; bertrt reads one per tensor or one per column");
    ++dequantized_;
    auto out = std::make_shared<std::string>(static_cast<size_t>(n) * 4, '\0');
    auto* dst = reinterpret_cast<float*>(out->data());
    const auto* s = reinterpret_cast<const float*>(scale.bytes->data());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t g = groups == 1 ? 0 : i % cols;
      const int v = q.dtype == DType::kI8 ? static_cast<int8_t>((*q.bytes)[i]) : static_cast<uint8_t>((*q.bytes)[i]);
      const int z = q.dtype == DType::kI8 ? static_cast<int8_t>((*zero.bytes)[g]) : static_cast<uint8_t>((*zero.bytes)[g]);
      dst[i] = static_cast<float>(v - z) * s[g];
    }
    return Data{DType::kF32, q.shape, out};
  }

  StatusOr<Data> Bytes(const onnx::Tensor& t) {
    const std::string& name = t.name();
    Data d;
    if (!OnnxDType(t.data_type(), &d.dtype))
      return Unimplemented(where_ + ": initializer " + name.substr(0, 200) + " has ONNX data type " +
                           std::to_string(t.data_type()) + ", which bertrt does not read");
    int64_t numel = 1;
    for (int64_t dim : t.dims()) {
      if (dim < 0 || (dim > 0 && numel > kMaxElements / dim)) return Bad(name + " has a bad shape");
      d.shape.push_back(dim);
      numel *= dim;
    }
    const size_t es = DTypeSize(d.dtype), nbytes = static_cast<size_t>(numel) * es;
    if (t.data_location() == 1) return External(t, nbytes, std::move(d));
    if (!t.raw_data().empty() || numel == 0) {
      if (t.raw_data().size() != nbytes)
        return Bad(name + " holds " + std::to_string(t.raw_data().size()) + " bytes for " +
                   ShapeToString(d.shape));
      d.bytes = std::make_shared<std::string>(t.raw_data());
      return d;
    }
    // Typed fields: each value in the field its type is stored in.
    d.bytes = std::make_shared<std::string>(nbytes, '\0');
    char* dst = d.bytes->data();
    auto count = [&](int64_t have) -> Status {
      return have == numel ? Status::Ok()
                           : Bad(name + " holds " + std::to_string(have) + " values for " + ShapeToString(d.shape));
    };
    switch (d.dtype) {
      case DType::kF32:
        RETURN_IF_ERROR(count(t.float_data_size()));
        std::memcpy(dst, t.float_data().data(), nbytes);
        break;
      case DType::kF64:
        RETURN_IF_ERROR(count(t.double_data_size()));
        std::memcpy(dst, t.double_data().data(), nbytes);
        break;
      case DType::kI64:
        RETURN_IF_ERROR(count(t.int64_data_size()));
        std::memcpy(dst, t.int64_data().data(), nbytes);
        break;
      default:  // int8, uint8, int32, bool, float16, bfloat16: int32_data, low bytes
        RETURN_IF_ERROR(count(t.int32_data_size()));
        for (int64_t i = 0; i < numel; ++i) {
          const int32_t v = t.int32_data(static_cast<int>(i));
          std::memcpy(dst + i * es, &v, es);  // little-endian: the low bytes
        }
    }
    return d;
  }

  StatusOr<Data> External(const onnx::Tensor& t, size_t nbytes, Data d) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoll(kv.value());
        if (kv.key() == "length") length = std::stoll(kv.value());
      } catch (const std::exception&) {
        return Bad(t.name() + "'s external " + kv.key() + " is not a number");
      }
    }
    // Names come from an untrusted file; they must stay in this directory.
    if (dir_.empty() || location.empty() || location.find('/') != std::string::npos ||
        location == "." || location == "..")
      return Bad(t.name() + "'s external data file \"" + location.substr(0, 200) +
                 "\" is not a plain file name beside the model");
    if (length < 0) length = static_cast<int64_t>(nbytes);
    if (offset < 0 || static_cast<size_t>(length) != nbytes)
      return Bad(t.name() + "'s external data is " + std::to_string(length) + " bytes for " +
                 ShapeToString(d.shape));
    const std::string path = JoinPath(dir_, location);
    ASSIGN_OR_RETURN(RegularFile f, OpenRegularFile(path));
    const FdCloser closer(f.fd);
    if (static_cast<uint64_t>(offset) > f.size || nbytes > f.size - offset)
      return Bad(t.name() + " lies outside " + location);
    // Entries may overlap: what is read is bounded by what the files hold.
    external_files_[location] = f.size;
    uint64_t held = 0;
    for (const auto& [file, size] : external_files_) held += size;
    if ((external_bytes_ += nbytes) > held)
      return Bad("its external data entries claim more bytes than their files hold");
    d.bytes = std::make_shared<std::string>(nbytes, '\0');
    RETURN_IF_ERROR(ReadFileRange(f.fd, static_cast<uint64_t>(offset), nbytes, d.bytes->data(), path));
    return d;
  }
};

}  // namespace

StatusOr<OnnxWeights> ParseOnnxModel(std::string_view bytes, const std::string& dir,
                                     const std::string& display_name) {
  onnx::Model model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return DataLoss(display_name + ": not an ONNX model (its protobuf does not parse)");
  if (!model.has_graph()) return DataLoss(display_name + ": an ONNX model without a graph");
  return Reader(model, dir, display_name).Run();
}

StatusOr<OnnxWeights> ReadOnnxModel(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadRegularFile(path));
  return ParseOnnxModel(bytes, fs::path(path).parent_path().string(), path);
}

}  // namespace bertrt::importer

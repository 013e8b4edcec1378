#include "checkpoint/onnx_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/files.h"
#include "checkpoint/config_fields.h"
#include "onnx_model.pb.h"

namespace bertrt::checkpoint {
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

// What the graph says beyond its weights (see the header).
struct GraphFacts {
  int head_dim = 0;  // 0: not found
  std::optional<double> layer_norm_eps;
  std::string hidden_act;  // "gelu", "gelu_new", "relu"; empty: not found
  std::string act_evidence;
  std::map<std::string, int> output_ranks;  // graph output -> rank (0: not given)
};

// "1e-12" for the float 9.99999996e-13 the graph holds.
std::string Shortest(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

// A tensor's shape, or nullptr when the export has no such tensor.
const std::vector<int64_t>* ShapeOf(const std::map<std::string, CheckpointTensor>& w,
                                    const std::string& name) {
  auto it = w.find(name);
  return it == w.end() ? nullptr : &it->second.data.shape();
}

// The number of encoder layers: one past the largest N in "<layers>N.".
int CountLayers(const std::map<std::string, CheckpointTensor>& w, const std::string& layers) {
  int n = 0;
  for (const auto& [name, t] : w) {
    if (name.rfind(layers, 0) != 0) continue;
    const size_t start = layers.size(), end = name.find('.', start);
    if (end == start || end == std::string::npos ||
        name.find_first_not_of("0123456789", start) != end || end - start > 6)
      continue;
    n = std::max(n, std::stoi(name.substr(start, end - start)) + 1);
  }
  return n;
}

// config.json's content as the graph implies it (see OnnxWeights::config).
nlohmann::json InferConfig(const std::map<std::string, CheckpointTensor>& w, const GraphFacts& f,
                           std::string* gap, std::string* how) {
  if (f.output_ranks.count("sentence_embedding") || f.output_ranks.count("token_embeddings")) {
    *gap = "a sentence-transformers export, whose pooling only its modules.json and "
           "1_Pooling/config.json describe";
    return nullptr;
  }
  struct Family {
    const char* prefix;  // of the encoder's tensors, in the task model
    const char* model_type;
    const char* arch;  // of transformers' classes
    const char* layers;
    const char* ffn_in;
  };
  static const Family kFamilies[] = {
      {"bert.", "bert", "Bert", "encoder.layer.", "intermediate.dense"},
      {"roberta.", "roberta", "Roberta", "encoder.layer.", "intermediate.dense"},
      {"distilbert.", "distilbert", "DistilBert", "transformer.layer.", "ffn.lin1"},
      // A bare encoder (BertModel, XLMRobertaModel): no prefix.
      {"", "bert", "Bert", "encoder.layer.", "intermediate.dense"}};
  const Family* fam = nullptr;
  for (const Family& c : kFamilies)
    if (ShapeOf(w, std::string(c.prefix) + "embeddings.word_embeddings.weight")) {
      fam = &c;
      break;
    }
  if (!fam) {
    *gap = "its weights are not a BERT, RoBERTa/XLM-R or DistilBERT encoder's";
    return nullptr;
  }
  const std::string p = fam->prefix;
  std::string model_type = fam->model_type, arch = fam->arch;
  const auto* words = ShapeOf(w, p + "embeddings.word_embeddings.weight");
  const auto* positions = ShapeOf(w, p + "embeddings.position_embeddings.weight");
  const auto* types = ShapeOf(w, p + "embeddings.token_type_embeddings.weight");
  const int layers = CountLayers(w, p + fam->layers);
  const auto* ffn = ShapeOf(w, p + fam->layers + "0." + fam->ffn_in + ".weight");
  if (words->size() != 2 || !positions || positions->size() != 2 || !ffn || ffn->size() != 2 ||
      layers == 0) {
    *gap = "its embeddings or first layer's FFN are not where a " + arch + " export has them";
    return nullptr;
  }
  // RoBERTa's task models are found by their prefix; a bare one by the one
  // token type every RoBERTa has (every BERT has two).
  if (p.empty() && types && types->size() == 2 && (*types)[0] == 1) {
    model_type = "roberta";
    arch = "Roberta";
  }
  const int64_t hidden = (*words)[1];
  if (f.head_dim <= 0 || hidden % f.head_dim != 0) {
    *gap = "the attention heads' width was not found (no Reshape splitting Q, K and V into "
           "heads)";
    return nullptr;
  }
  if (f.hidden_act.empty()) {
    *gap = "the feed-forward activation was not found (no Erf, GELU tanh form or Relu)";
    return nullptr;
  }
  nlohmann::json c;
  c["model_type"] = model_type;
  c["vocab_size"] = (*words)[0];
  c["max_position_embeddings"] = (*positions)[0];
  const int64_t heads = hidden / f.head_dim;
  if (model_type == "distilbert") {
    c["dim"] = hidden;
    c["n_layers"] = layers;
    c["n_heads"] = heads;
    c["hidden_dim"] = (*ffn)[0];
    c["activation"] = f.hidden_act == "gelu_new" ? "gelu_new" : f.hidden_act;
  } else {
    c["hidden_size"] = hidden;
    c["num_hidden_layers"] = layers;
    c["num_attention_heads"] = heads;
    c["intermediate_size"] = (*ffn)[0];
    c["hidden_act"] = f.hidden_act;
    c["type_vocab_size"] = types && types->size() == 2 ? (*types)[0] : 1;
    if (f.layer_norm_eps) c["layer_norm_eps"] = *f.layer_norm_eps;
    if (model_type == "roberta") c["pad_token_id"] = 1;  // its positions start after it
  }
  // The head: the weights say which, the outputs' rank which classifier.
  std::string head;
  int64_t labels = 0;
  auto logits_rank = f.output_ranks.find("logits");
  // RoBERTa's sequence classifier ends in out_proj; its token classifier does not.
  const auto* cls = ShapeOf(w, model_type == "roberta" && ShapeOf(w, "classifier.out_proj.weight")
                                   ? "classifier.out_proj.weight"
                                   : "classifier.weight");
  if (ShapeOf(w, "qa_outputs.weight")) {
    head = "ForQuestionAnswering";
  } else if (cls && cls->size() == 2) {
    labels = (*cls)[0];
    bool per_token;
    if (logits_rank != f.output_ranks.end() && logits_rank->second > 0)
      per_token = logits_rank->second == 3;
    else  // the sequence classifiers read a pooler (DistilBERT: pre_classifier) or a dense
      per_token = !ShapeOf(w, p + "pooler.dense.weight") && !ShapeOf(w, "pre_classifier.weight") &&
                  !ShapeOf(w, "classifier.dense.weight");
    head = per_token ? "ForTokenClassification" : "ForSequenceClassification";
  } else {
    head = "Model";
  }
  c["architectures"] = {arch + head};
  if (labels > 0) {
    nlohmann::json id2label = nlohmann::json::object();
    for (int64_t i = 0; i < labels; ++i) id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    c["id2label"] = id2label;
  }
  *how = arch + head + ", " + std::to_string(layers) + " layers of width " + std::to_string(hidden) +
         ", " + std::to_string(heads) + " heads (width " + std::to_string(f.head_dim) +
         " from the Q/K/V Reshape), FFN " + std::to_string((*ffn)[0]) + ", " + f.hidden_act + " (" +
         f.act_evidence + ")" +
         (f.layer_norm_eps ? ", layer_norm_eps " + Shortest(*f.layer_norm_eps) : std::string()) +
         (labels ? ", " + std::to_string(labels) + " labels" : std::string());
  return c;
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
        // (A Transpose without its input, in a file made to crash readers, is no weight.)
        if (p == producer_.end() || p->second->op_type() != "Transpose" ||
            p->second->input_size() < 1 || !initializers_.count(p->second->input(0)))
          continue;  // activations times activations: attention's own MatMuls
        weight = p->second->input(0);
        transposed_in_graph = true;
      }
      const std::string bias = n.op_type() == "Gemm" && n.input_size() > 2 ? n.input(2) : BiasAfter(n);
      std::string name;
      if (EndsWith(bias, ".bias") && initializers_.count(bias)) {
        name = bias.substr(0, bias.size() - 5) + ".weight";
        named_by_bias_ += name != Unquantized(weight);
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
    ImpliedConfig& c = weights.config;
    c.config = InferConfig(out, Facts(), &c.gap, &c.derivation);
    for (auto& [name, t] : out) weights.tensors.push_back(std::move(t));
    weights.dequantized = dequantized_;
    weights.named_by_bias = named_by_bias_;
    for (const auto& [location, size] : external_files_) weights.files.push_back(JoinPath(dir_, location));
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
  int named_by_bias_ = 0;

  GraphFacts Facts() {
    GraphFacts f;
    const onnx::Graph& g = model_.graph();
    for (const onnx::ValueInfo& v : g.output())
      f.output_ranks[v.name()] = v.type().tensor_type().shape().dim_size();
    std::map<int64_t, int> head_dims;  // candidate -> Reshapes voting for it
    bool erf = false, tanh_form = false, relu = false;
    for (const onnx::Node& n : g.node()) {
      const std::string& op = n.op_type();
      if (op == "Reshape" && n.input_size() == 2) {
        // [.., heads, head_dim] as a constant, or a Concat ending in one.
        std::optional<std::vector<double>> shape = SmallConstant(n.input(1));
        auto p = producer_.find(n.input(1));
        if (!shape && p != producer_.end() && p->second->op_type() == "Concat" &&
            p->second->input_size() > 0)
          shape = SmallConstant(p->second->input(p->second->input_size() - 1));
        if (shape && !shape->empty() && shape->back() > 1 && shape->back() < (1 << 16))
          ++head_dims[static_cast<int64_t>(shape->back())];
      } else if (op == "LayerNormalization") {
        f.layer_norm_eps = 1e-5;  // the ONNX default
        for (const onnx::Attribute& a : n.attribute())
          if (a.name() == "epsilon") f.layer_norm_eps = a.f();
      } else if (op == "Sqrt" && n.input_size() == 1 && !f.layer_norm_eps) {
        // A decomposed LayerNorm (opset < 17): sqrt(variance + eps).
        auto p = producer_.find(n.input(0));
        if (p != producer_.end() && p->second->op_type() == "Add" && p->second->input_size() == 2)
          for (const std::string& in : p->second->input())
            if (auto v = SmallConstant(in); v && v->size() == 1 && (*v)[0] > 0 && (*v)[0] < 1e-3)
              f.layer_norm_eps = (*v)[0];
      } else if (op == "Erf") {
        erf = true;
      } else if (op == "Relu") {
        relu = true;
      } else if (op == "Gelu") {  // opset 20
        for (const onnx::Attribute& a : n.attribute())
          if (a.name() == "approximate" && a.s() == "tanh") tanh_form = true;
        erf = erf || !tanh_form;
      } else if (op == "Mul") {
        // The tanh form's sqrt(2 / pi).
        for (const std::string& in : n.input())
          if (auto v = SmallConstant(in); v && v->size() == 1 && std::fabs((*v)[0] - 0.7978845608) < 1e-6)
            tanh_form = true;
      }
    }
    int votes = 0;
    for (const auto& [dim, count] : head_dims)
      if (count > votes) {
        votes = count;
        f.head_dim = static_cast<int>(dim);
      }
    // The pooler's Tanh is no activation of the FFN; sqrt(2/pi) is.
    if (tanh_form) {
      f.hidden_act = "gelu_new";
      f.act_evidence = "GELU's tanh form";
    } else if (erf) {
      f.hidden_act = "gelu";
      f.act_evidence = "Erf";
    } else if (relu) {
      f.hidden_act = "relu";
      f.act_evidence = "Relu";
    }
    return f;
  }

  // The values of a small constant (an initializer or a Constant node's
  // value); nullopt when `name` is not one.
  std::optional<std::vector<double>> SmallConstant(const std::string& name) {
    const onnx::Tensor* t = nullptr;
    if (auto it = initializers_.find(name); it != initializers_.end()) {
      t = it->second;
    } else if (auto p = producer_.find(name); p != producer_.end() && p->second->op_type() == "Constant") {
      for (const onnx::Attribute& a : p->second->attribute()) {
        if (a.name() == "value" && a.has_t()) t = &a.t();
        if (a.name() == "value_float") return std::vector<double>{a.f()};
        if (a.name() == "value_int") return std::vector<double>{static_cast<double>(a.i())};
        if (a.name() == "value_ints") return std::vector<double>(a.ints().begin(), a.ints().end());
      }
    }
    if (!t || t->data_location() == 1 || t->dims_size() > 1 || (t->dims_size() == 1 && t->dims(0) > 16))
      return std::nullopt;
    auto d = Bytes(*t);
    if (!d.ok()) return std::nullopt;
    std::vector<double> values;
    const char* bytes = d->bytes->data();
    for (int64_t i = 0; i < d->numel(); ++i) {
      switch (d->dtype) {
        case DType::kF32: { float v; std::memcpy(&v, bytes + 4 * i, 4); values.push_back(v); break; }
        case DType::kF64: { double v; std::memcpy(&v, bytes + 8 * i, 8); values.push_back(v); break; }
        case DType::kI64: { int64_t v; std::memcpy(&v, bytes + 8 * i, 8); values.push_back(static_cast<double>(v)); break; }
        case DType::kI32: { int32_t v; std::memcpy(&v, bytes + 4 * i, 4); values.push_back(v); break; }
        default: return std::nullopt;
      }
    }
    return values;
  }

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
  ASSIGN_OR_RETURN(OnnxWeights w, ParseOnnxModel(bytes, fs::path(path).parent_path().string(), path));
  w.files.insert(w.files.begin(), path);
  return w;
}

}  // namespace bertrt::checkpoint

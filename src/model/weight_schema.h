// A model's weights described once, from its config: which tensors the
// forward reads, grouped as it reads them (a table, a Linear's weight and
// bias, a LayerNorm's gamma and beta), each with its plan section's name,
// shape and precision and the ModelWeights fields it comes from. The plan
// layout, the model check and the backends' weight preparation
// (PrepareWeights: the CPU setup, the CUDA upload) all read this.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "ops/encoder_ops.h"

namespace bertrt::model {

// One ModelWeights tensor: a field of the model, of layer `index` or of Dense
// module `index`.
struct TensorRef {
  Tensor ModelWeights::*model = nullptr;
  Tensor LayerWeights::*layer = nullptr;
  Tensor DenseWeights::*dense = nullptr;
  int index = 0;

  const Tensor& In(const ModelWeights& w) const;
  Tensor& In(ModelWeights& w) const;
};

// One tensor as a plan stores it: parts concatenated along the first
// dimension (Q | K | V), each with the name messages give it.
struct WeightTensor {
  std::string name;            // the plan's section ("layers.3.qkv_w")
  std::vector<int64_t> shape;  // of the whole
  // GEMM weights and biases and embedding tables: in the compute precision
  // (a plan's fp16/bf16); LayerNorms, the classifier, Dense modules and the
  // relative position bias: fp32.
  bool in_compute_precision = false;
  std::vector<TensorRef> parts;
  std::vector<std::string> part_names;  // "layer 3 query weight"
  // Not a tensor of its own: a decoder tied to the word embeddings (read
  // from there, stored once).
  bool stored = true;
};

// What a group of tensors is to the forward.
enum class Role {
  kWordEmbeddings,
  kPositionEmbeddings,
  kTokenTypeEmbeddings,
  kEmbeddingNorm,
  kRelativeBias,
  kQkv,
  kAttnOut,
  kAttnNorm,
  kFfnIn,
  kFfnOut,
  kFfnNorm,
  kFinalNorm,
  kPooler,
  kPoolerNorm,
  kClassifier,
  kDense,
  kMlmDense,
  kMlmNorm,
  kMlmDecoder,
};

struct WeightGroup {
  Role role;
  int index = -1;  // the layer or the Dense module; -1 for the model's own
  // A table: one tensor. A Linear: weight, then bias (a Dense module without
  // one: the weight alone). A LayerNorm: gamma, then beta.
  std::vector<WeightTensor> tensors;
};

// The weights of a model with `config`, in the order plans store them.
// `has_pooler`: the pooler's tensors are part of it (a head that reads them,
// or a BertModel saved with them); `untied_decoder`: SPLADE's decoder has a
// weight of its own.
std::vector<WeightGroup> WeightSchema(const ModelConfig& config, bool has_pooler,
                                      bool untied_decoder);

// The weights `model`'s forward reads: WeightSchema with the pooler where its
// head uses one (HeadUsesPooler) and the decoder as its weights have it.
std::vector<WeightGroup> ForwardWeightSchema(const Model& model);

// Every tensor of the schema, in order.
std::vector<const WeightTensor*> Tensors(const std::vector<WeightGroup>& schema);

// The encoder's four GEMMs of a layer (QKV, attention output, FFN in and
// out): the Linears 8 bits and bf16 apply to, the GEMMs the GPU's plan
// builder times.
inline bool IsEncoderLinear(Role role) {
  return role == Role::kQkv || role == Role::kAttnOut || role == Role::kFfnIn ||
         role == Role::kFfnOut;
}

// What reports call encoder Linear `role` ("layer 3 " + this): "qkv",
// "attention output", "ffn in", "ffn out".
const char* EncoderLinearName(Role role);

// A backend layer's Linear of encoder Linear `role` (its members qkv,
// attn_out, ffn_in, ffn_out); nullptr for any other role.
template <class Layer>
auto EncoderLinearOf(Layer& layer, Role role) -> decltype(&layer.qkv) {
  switch (role) {
    case Role::kQkv:
      return &layer.qkv;
    case Role::kAttnOut:
      return &layer.attn_out;
    case Role::kFfnIn:
      return &layer.ffn_in;
    case Role::kFfnOut:
      return &layer.ffn_out;
    default:
      return nullptr;
  }
}

// The parts of each tensor present with their shapes, in the compute
// precision where the schema says so (else fp32): the model check's part.
// The weight of a Linear `quantized` holds is its 8-bit form of the same
// shape (its fp32 weight may be absent).
Status CheckWeights(const ModelWeights& weights, const std::vector<WeightGroup>& schema,
                    const QuantizedWeights* quantized = nullptr);

// The forward's weights in a backend's types: its layers (members qkv,
// attn_out, ffn_in, ffn_out, attn_norm, ffn_norm), GEMM weights and small
// heads' weights. Weights<Ops> names them by a backend's ops class.
template <class LayerT, class LinearT, class SmallLinearT>
struct WeightsOf {
  using Layer = LayerT;
  using Linear = LinearT;
  using SmallLinear = SmallLinearT;
  std::vector<Layer> layers;
  ops::Norm embedding_norm, final_norm;  // final: pre-norm models
  std::optional<Linear> pooler;          // none: no pooler in the head
  ops::Norm pooler_norm;                 // a prediction head's LayerNorm
  std::optional<SmallLinear> classifier;
  std::vector<SmallLinear> dense;                // sentence-transformers Dense modules
  std::optional<Linear> mlm_dense, mlm_decoder;  // SPLADE's masked-LM head
  ops::Norm mlm_norm;
};

template <class Ops>
using Weights =
    WeightsOf<typename Ops::Layer, typename Ops::LinearWeights, typename Ops::SmallLinearWeights>;

// Makes a backend's weights (a WeightsOf) from the schema's groups. `maker`
// makes each kind, naming the group in its errors:
//   StatusOr<Linear> Linear(const std::vector<const Tensor*>& w,
//                           const std::vector<const Tensor*>& b, const std::string& name)
//   StatusOr<SmallLinear> SmallLinear(const Tensor& w, const Tensor* b, name)
//   StatusOr<ops::Norm> Norm(const Tensor& gamma, const Tensor& beta, name)
// Tables and the relative position bias are the backend's own (its tables).
template <class W, class Maker>
StatusOr<W> PrepareWeights(const ModelWeights& model, const std::vector<WeightGroup>& schema,
                           Maker& maker) {
  W out;
  auto parts = [&model](const WeightTensor& t) {
    std::vector<const Tensor*> p;
    for (const TensorRef& r : t.parts) p.push_back(&r.In(model));
    return p;
  };
  for (const WeightGroup& g : schema) {
    const std::string& name = g.tensors[0].name;
    auto linear = [&]() { return maker.Linear(parts(g.tensors[0]), parts(g.tensors[1]), name); };
    auto norm = [&]() {
      return maker.Norm(g.tensors[0].parts[0].In(model), g.tensors[1].parts[0].In(model), name);
    };
    typename W::Layer* layer = nullptr;
    if (g.index >= 0 && g.role != Role::kDense) {
      if (out.layers.size() <= size_t(g.index)) out.layers.resize(g.index + 1);
      layer = &out.layers[g.index];
    }
    switch (g.role) {
      case Role::kWordEmbeddings:
      case Role::kPositionEmbeddings:
      case Role::kTokenTypeEmbeddings:
      case Role::kRelativeBias:
        break;  // the backend's tables
      case Role::kEmbeddingNorm: {
        ASSIGN_OR_RETURN(out.embedding_norm, norm());
        break;
      }
      case Role::kQkv: {
        ASSIGN_OR_RETURN(layer->qkv, linear());
        break;
      }
      case Role::kAttnOut: {
        ASSIGN_OR_RETURN(layer->attn_out, linear());
        break;
      }
      case Role::kAttnNorm: {
        ASSIGN_OR_RETURN(layer->attn_norm, norm());
        break;
      }
      case Role::kFfnIn: {
        ASSIGN_OR_RETURN(layer->ffn_in, linear());
        break;
      }
      case Role::kFfnOut: {
        ASSIGN_OR_RETURN(layer->ffn_out, linear());
        break;
      }
      case Role::kFfnNorm: {
        ASSIGN_OR_RETURN(layer->ffn_norm, norm());
        break;
      }
      case Role::kFinalNorm: {
        ASSIGN_OR_RETURN(out.final_norm, norm());
        break;
      }
      case Role::kPooler: {
        ASSIGN_OR_RETURN(out.pooler, linear());
        break;
      }
      case Role::kPoolerNorm: {
        ASSIGN_OR_RETURN(out.pooler_norm, norm());
        break;
      }
      case Role::kMlmDense: {
        ASSIGN_OR_RETURN(out.mlm_dense, linear());
        break;
      }
      case Role::kMlmNorm: {
        ASSIGN_OR_RETURN(out.mlm_norm, norm());
        break;
      }
      case Role::kMlmDecoder: {
        ASSIGN_OR_RETURN(out.mlm_decoder, linear());
        break;
      }
      case Role::kClassifier:
      case Role::kDense: {
        const Tensor* bias = g.tensors.size() > 1 ? &g.tensors[1].parts[0].In(model) : nullptr;
        ASSIGN_OR_RETURN(auto small,
                         maker.SmallLinear(g.tensors[0].parts[0].In(model), bias, name));
        if (g.role == Role::kClassifier)
          out.classifier = std::move(small);
        else
          out.dense.push_back(std::move(small));
        break;
      }
    }
  }
  return out;
}

}  // namespace bertrt::model

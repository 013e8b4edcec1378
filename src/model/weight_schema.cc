#include "model/weight_schema.h"

#include "bertrt/quantized_weights.h"
#include "model/model_check.h"

namespace bertrt::model {
namespace {

using Part = std::pair<TensorRef, std::string>;  // a tensor's part and its name in messages

TensorRef Model(Tensor ModelWeights::*field) { return {.model = field}; }
TensorRef Layer(int i, Tensor LayerWeights::*field) { return {.layer = field, .index = i}; }
TensorRef Dense(int i, Tensor DenseWeights::*field) { return {.dense = field, .index = i}; }

// Builds the schema a group at a time.
class Builder {
 public:
  void Group(Role role, int index) { groups_.push_back({role, index, {}}); }
  // A tensor of the last group: its parts concatenated along the first
  // dimension into `shape`.
  void Add(std::string name, std::vector<int64_t> shape, bool compute, std::vector<Part> parts,
           bool stored = true) {
    WeightTensor t{std::move(name), std::move(shape), compute, {}, {}, stored};
    for (auto& [ref, what] : parts) {
      t.parts.push_back(ref);
      t.part_names.push_back(std::move(what));
    }
    groups_.back().tensors.push_back(std::move(t));
  }
  // A LayerNorm's gamma and beta, "<stem>ln_gamma" and "<stem>ln_beta".
  void Norm(Role role, int index, const std::string& stem, int64_t h, TensorRef gamma,
            TensorRef beta, const std::string& what) {
    Group(role, index);
    Add(stem + "ln_gamma", {h}, false, {{gamma, what + " LayerNorm weight"}});
    Add(stem + "ln_beta", {h}, false, {{beta, what + " LayerNorm bias"}});
  }
  // A GEMM's weight [out, in] and bias [out] in the compute precision,
  // "<stem>w" and "<stem>b".
  void Linear(Role role, int index, const std::string& stem, int64_t out, int64_t in, TensorRef w,
              TensorRef b, const std::string& what) {
    Group(role, index);
    Add(stem + "w", {out, in}, true, {{w, what + " weight"}});
    Add(stem + "b", {out}, true, {{b, what + " bias"}});
  }
  std::vector<WeightGroup> Done() { return std::move(groups_); }

 private:
  std::vector<WeightGroup> groups_;
};

}  // namespace

const Tensor& TensorRef::In(const ModelWeights& w) const {
  if (layer) return w.layers[index].*layer;
  if (dense) return w.dense[index].*dense;
  return w.*model;
}

Tensor& TensorRef::In(ModelWeights& w) const {
  return const_cast<Tensor&>(In(static_cast<const ModelWeights&>(w)));
}

std::vector<WeightGroup> WeightSchema(const ModelConfig& c, bool has_pooler, bool untied_decoder) {
  using W = ModelWeights;
  using L = LayerWeights;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  Builder s;
  s.Group(Role::kWordEmbeddings, -1);
  s.Add("embeddings.word", {c.vocab_size, h}, true,
        {{Model(&W::word_embeddings), "word_embeddings"}});
  // Rotary models have no position table.
  if (c.rope_theta <= 0.0f) {
    s.Group(Role::kPositionEmbeddings, -1);
    s.Add("embeddings.position", {c.max_position_embeddings, h}, true,
          {{Model(&W::position_embeddings), "position_embeddings"}});
  }
  s.Group(Role::kTokenTypeEmbeddings, -1);
  s.Add("embeddings.token_type", {c.type_vocab_size, h}, true,
        {{Model(&W::token_type_embeddings), "token_type_embeddings"}});
  s.Norm(Role::kEmbeddingNorm, -1, "embeddings.", h, Model(&W::emb_ln_gamma),
         Model(&W::emb_ln_beta), "embeddings");
  if (c.relative_attention_buckets > 0) {
    s.Group(Role::kRelativeBias, -1);
    s.Add("relative_attention_bias", {c.relative_attention_buckets, c.num_heads}, false,
          {{Model(&W::relative_attention_bias), "relative_attention_bias"}});
  }
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string stem = "layers." + std::to_string(i) + ".";
    const std::string p = "layer " + std::to_string(i) + " ";
    // Q, K and V: one GEMM over their concatenation.
    s.Group(Role::kQkv, i);
    s.Add(stem + "qkv_w", {3 * h, h}, true,
          {{Layer(i, &L::query_w), p + "query weight"},
           {Layer(i, &L::key_w), p + "key weight"},
           {Layer(i, &L::value_w), p + "value weight"}});
    s.Add(stem + "qkv_b", {3 * h}, true,
          {{Layer(i, &L::query_b), p + "query bias"},
           {Layer(i, &L::key_b), p + "key bias"},
           {Layer(i, &L::value_b), p + "value bias"}});
    s.Linear(Role::kAttnOut, i, stem + "attn_out_", h, h, Layer(i, &L::attn_out_w),
             Layer(i, &L::attn_out_b), p + "attention output");
    // A pre-norm model's first layer reads the embeddings' LayerNorm instead.
    if (!(c.pre_norm && i == 0))
      s.Norm(Role::kAttnNorm, i, stem + "attn_", h, Layer(i, &L::attn_ln_gamma),
             Layer(i, &L::attn_ln_beta), p + "attention");
    // A gated FFN's first linear gives both halves.
    s.Linear(Role::kFfnIn, i, stem + "ffn_in_", c.gated_ffn ? 2 * inter : inter, h,
             Layer(i, &L::ffn_in_w), Layer(i, &L::ffn_in_b), p + "intermediate");
    s.Linear(Role::kFfnOut, i, stem + "ffn_out_", h, inter, Layer(i, &L::ffn_out_w),
             Layer(i, &L::ffn_out_b), p + "output");
    s.Norm(Role::kFfnNorm, i, stem + "ffn_", h, Layer(i, &L::ffn_ln_gamma),
           Layer(i, &L::ffn_ln_beta), p + "output");
  }
  if (c.pre_norm)
    s.Norm(Role::kFinalNorm, -1, "final_", h, Model(&W::final_ln_gamma), Model(&W::final_ln_beta),
           "final");
  if (has_pooler) {
    s.Linear(Role::kPooler, -1, "pooler_", h, h, Model(&W::pooler_w), Model(&W::pooler_b),
             "pooler dense");
    if (c.prediction_head)
      s.Norm(Role::kPoolerNorm, -1, "pooler_", h, Model(&W::pooler_ln_gamma),
             Model(&W::pooler_ln_beta), "prediction head");
  }
  if (HasClassifier(c.head)) {
    const int64_t labels = c.head == HeadKind::kQuestionAnswering ? 2 : c.num_labels;
    s.Group(Role::kClassifier, -1);
    s.Add("classifier_w", {labels, h}, false, {{Model(&W::classifier_w), "classifier weight"}});
    s.Add("classifier_b", {labels}, false, {{Model(&W::classifier_b), "classifier bias"}});
  }
  if (c.head == HeadKind::kSparseEmbedding) {
    s.Linear(Role::kMlmDense, -1, "mlm.dense_", h, h, Model(&W::mlm_dense_w),
             Model(&W::mlm_dense_b), "masked-LM transform");
    s.Norm(Role::kMlmNorm, -1, "mlm.", h, Model(&W::mlm_ln_gamma), Model(&W::mlm_ln_beta),
           "masked-LM");
    // The decoder's weight is stored only when the checkpoint did not tie it
    // to the word embeddings (a tied one is not stored twice).
    s.Group(Role::kMlmDecoder, -1);
    s.Add("mlm.decoder_w", {c.vocab_size, h}, true,
          {{Model(untied_decoder ? &W::mlm_decoder_w : &W::word_embeddings),
            "masked-LM decoder weight"}},
          untied_decoder);
    s.Add("mlm.decoder_b", {c.vocab_size}, true,
          {{Model(&W::mlm_decoder_b), "masked-LM decoder bias"}});
  }
  for (size_t i = 0; i < c.dense.size(); ++i) {
    const DenseSpec& d = c.dense[i];
    const int k = static_cast<int>(i);
    const std::string stem = "dense." + std::to_string(i) + ".";
    const std::string p = "Dense module " + std::to_string(i) + " ";
    s.Group(Role::kDense, k);
    s.Add(stem + "w", {d.out_features, d.in_features}, false,
          {{Dense(k, &DenseWeights::w), p + "weight"}});
    if (d.bias)
      s.Add(stem + "b", {d.out_features}, false, {{Dense(k, &DenseWeights::b), p + "bias"}});
  }
  return s.Done();
}

std::vector<WeightGroup> ForwardWeightSchema(const bertrt::Model& model) {
  return WeightSchema(model.config, HeadUsesPooler(model), !model.weights.mlm_decoder_w.empty());
}

const char* EncoderLinearName(Role role) {
  switch (role) {
    case Role::kQkv:
      return "qkv";
    case Role::kAttnOut:
      return "attention output";
    case Role::kFfnIn:
      return "ffn in";
    case Role::kFfnOut:
      return "ffn out";
    default:
      return "";
  }
}

std::vector<const WeightTensor*> Tensors(const std::vector<WeightGroup>& schema) {
  std::vector<const WeightTensor*> all;
  for (const WeightGroup& g : schema)
    for (const WeightTensor& t : g.tensors) all.push_back(&t);
  return all;
}

Status CheckWeights(const ModelWeights& weights, const std::vector<WeightGroup>& schema,
                    const QuantizedWeights* quantized) {
  for (const WeightTensor* t : Tensors(schema)) {
    // An 8-bit Linear's weight: its operands instead (the engines check
    // their scales); its fp32 weight, if any (a model just quantized), is
    // not read.
    if (const QuantizedLinear* q = FindQuantizedLinear(quantized, t->name)) {
      const Tensor& w = q->weights;
      const DType want = quantized->format == QuantFormat::kFp8 ? DType::kF8E4M3 : DType::kI8;
      if (w.shape() != t->shape || w.dtype() != want)
        return InvalidArgument("model: the 8-bit weight " + t->name + " is " +
                               DTypeName(w.dtype()) + ShapeToString(w.shape()) + ", expected " +
                               DTypeName(want) + ShapeToString(t->shape));
      continue;
    }
    // Q, K and V are equal row blocks of the whole.
    std::vector<int64_t> part_shape = t->shape;
    part_shape[0] /= static_cast<int64_t>(t->parts.size());
    for (size_t k = 0; k < t->parts.size(); ++k)
      RETURN_IF_ERROR(CheckTensor(t->parts[k].In(weights), part_shape, t->part_names[k],
                                  t->in_compute_precision));
  }
  return Status::Ok();
}

}  // namespace bertrt::model

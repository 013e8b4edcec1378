// A BERT-family encoder as bertrt understands it: its configuration, its head
// and its weights in one fixed naming, whatever the source checkpoint called them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bertrt/status.h"
#include "bertrt/tensor.h"

namespace bertrt {

enum class HiddenAct { kGelu /* erf */, kGeluTanh /* gelu_new, gelu_pytorch_tanh */, kRelu };

enum class HeadKind {
  kBase,                    // BertModel: pooler_output (last_hidden_state on request)
  kSequenceClassification,  // pooler dense + tanh + classifier
  kTokenClassification,     // classifier on every token
  kQuestionAnswering,       // qa_outputs -> start/end logits
  kSentenceEmbedding,       // sentence-transformers: pooling (+ normalize)
  kSparseEmbedding,         // SPLADE: the masked-LM head's logits, log(1 + relu), pooled
};

// sentence-transformers' pooling modes: the first token, the mean, the
// element-wise max, the sum over sqrt(length), the mean weighted by position
// (1, 2, ...), the last token.
enum class Pooling { kCls, kMean, kMax, kMeanSqrtLen, kWeightedMean, kLastToken };

// The activation of a sentence-transformers Dense module.
enum class DenseActivation { kIdentity, kTanh, kRelu, kGelu, kSigmoid };

// A sentence-transformers Dense module: y = act(x W^T [+ b]).
struct DenseSpec {
  int in_features = 0, out_features = 0;
  bool bias = true;
  DenseActivation activation = DenseActivation::kTanh;
};

const char* HeadKindName(HeadKind h);
const char* HiddenActName(HiddenAct a);
const char* PoolingName(Pooling p);  // sentence-transformers' name: "cls", "mean", ...
const char* DenseActivationName(DenseActivation a);  // "identity", "tanh", ...

struct ModelConfig {
  std::string architecture;  // e.g. "BertForSequenceClassification"
  std::string model_type;    // e.g. "bert"
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int intermediate_size = 0;
  int max_position_embeddings = 0;
  int type_vocab_size = 0;
  float layer_norm_eps = 1e-12f;
  HiddenAct hidden_act = HiddenAct::kGelu;
  int pad_token_id = 0;

  // How a family's encoder differs from BERT's, in the building blocks both
  // engines run (each family's file in src/families sets them):
  // - token i of a sequence reads position row position_offset + i
  //   (RoBERTa-family: pad_token_id + 1, as their position ids start after
  //   padding_idx);
  int position_offset = 0;
  // - whether token type ids reach the model: RoBERTa's and DistilBERT's
  //   tokenizers hand it none, so it reads type 0 whatever the ids say;
  bool takes_token_types = true;
  // - the activation of the dense layer between the first token and the
  //   sequence classifier: BERT's pooler and RoBERTa's classification head
  //   use tanh, DistilBERT's pre_classifier ReLU.
  DenseActivation pooler_activation = DenseActivation::kTanh;
  // - MPNet's relative position bias: each head's attention scores get
  //   ModelWeights::relative_attention_bias[bucket(j - i)], T5's bidirectional
  //   buckets over this many (0: none) up to a distance of 128.
  int relative_attention_buckets = 0;
  // - ModernBERT's pre-LayerNorm layers (pre_norm): x += attention(LN(x))
  //   (the first layer's without its LN: ModelWeights leaves it empty),
  //   x += ffn(LN(x)), and final_ln over the last layer's output;
  bool pre_norm = false;
  // - a gated FFN (GeGLU): its first linear gives 2 x intermediate_size
  //   values per token, hidden_act(first half) * second half;
  bool gated_ffn = false;
  // - rotary positions (rope_theta > 0) instead of a position table: global
  //   layers rotate Q and K by rope_theta, local ones by local_rope_theta;
  float rope_theta = 0.0f;
  float local_rope_theta = 0.0f;
  // - local attention: a layer whose index is not a multiple of
  //   global_attention_every sees only the keys within local_window
  //   positions of each query (0: every layer global);
  int local_window = 0;
  int global_attention_every = 1;
  // - the sequence classifier reads the mean of the last layer's tokens
  //   instead of the first token (ModernBERT's classifier_pooling "mean");
  bool classifier_mean_pooling = false;
  // - ModernBERT's prediction head before the classifier: the pooler's
  //   dense + activation, then a LayerNorm (ModelWeights::pooler_ln_*), on the
  //   pooled row for sequence classification and on every token for token
  //   classification and QA;
  bool prediction_head = false;
  // - the masked-LM head's transform activation (BERT's hidden_act;
  //   RoBERTa's lm_head and MPNet's: GELU).
  HiddenAct mlm_activation = HiddenAct::kGelu;

  HeadKind head = HeadKind::kBase;
  int num_labels = 0;               // classifier outputs (2 for QA)
  std::vector<std::string> labels;  // id2label, index = class id
  // Sentence-transformers: each pooling mode's vector, concatenated in this
  // order, then each Dense module, then the L2 normalization, then the first
  // truncate_dim values (sentence-transformers truncates after normalizing).
  std::vector<Pooling> pooling_modes = {Pooling::kMean};
  std::vector<DenseSpec> dense;
  bool normalize = false;
  int truncate_dim = 0;  // 0: the whole vector
  // config_sentence_transformers.json's prompts (name -> text put before the
  // input) and the one applied when a request names none ("": none).
  std::vector<std::pair<std::string, std::string>> prompts;
  std::string default_prompt_name;
  // 1_Pooling's include_prompt: false leaves a prompt's tokens out of the
  // pooling (RaggedBatch::pool_start, set where the prompt is put before the text).
  bool include_prompt = true;
  // SPLADE (kSparseEmbedding): each vocabulary entry's log(1 + relu(logit))
  // -- applied twice with splade_log1p_twice (OpenSearch's "log1p_relu") --
  // taken as the max over the sequence's tokens, or the sum with splade_sum.
  bool splade_sum = false;
  bool splade_log1p_twice = false;
  // Longest input the model serves (sentence_bert_config max_seq_length, else
  // max_positions()).
  int max_seq_length = 0;

  int head_dim() const { return num_heads ? hidden_size / num_heads : 0; }
  bool local_layer(int i) const { return local_window > 0 && i % global_attention_every != 0; }
  // The longest sequence the position table serves.
  int max_positions() const { return max_position_embeddings - position_offset; }
  // Widths of the concatenated pooled vector, of the vector after the Dense
  // modules, and of the sentence embedding returned (after truncate_dim).
  int pooled_width() const { return static_cast<int>(pooling_modes.size()) * hidden_size; }
  int dense_output_width() const {
    return dense.empty() ? pooled_width() : dense.back().out_features;
  }
  int embedding_width() const;
  // The text put before an input, as sentence-transformers' encode does:
  // prompt `name`'s, or with none named the default prompt's ("" when the
  // model has none); a name the model lacks is an error that lists its prompts.
  StatusOr<std::string> PromptText(const std::optional<std::string>& name) const;
  // Class i's name: id2label's, or "LABEL_i" as transformers names it.
  std::string LabelName(int i) const;
};

// Linear weights keep HF's [out_features, in_features] layout.
struct LayerWeights {
  Tensor query_w, query_b, key_w, key_b, value_w, value_b;
  Tensor attn_out_w, attn_out_b, attn_ln_gamma, attn_ln_beta;
  Tensor ffn_in_w, ffn_in_b, ffn_out_w, ffn_out_b, ffn_ln_gamma, ffn_ln_beta;
};

// A sentence-transformers Dense module's linear layer (fp32; bias empty when
// the module has none).
struct DenseWeights {
  Tensor w, b;
};

struct ModelWeights {
  Tensor word_embeddings, position_embeddings, token_type_embeddings;
  Tensor emb_ln_gamma, emb_ln_beta;
  Tensor relative_attention_bias;  // [buckets, heads], fp32; empty without one
  std::vector<LayerWeights> layers;
  Tensor pooler_w, pooler_b;          // empty when the checkpoint has no pooler
  // ModernBERT: the prediction head's LayerNorm after the pooler's
  // activation, and the final LayerNorm of pre_norm models; empty: none.
  Tensor pooler_ln_gamma, pooler_ln_beta;
  Tensor final_ln_gamma, final_ln_beta;
  Tensor classifier_w, classifier_b;  // classifier / qa_outputs; empty for base/embedding
  std::vector<DenseWeights> dense;    // one per ModelConfig::dense
  // The masked-LM head (kSparseEmbedding): transform dense + activation +
  // LayerNorm, then the decoder to the vocabulary, whose weight is
  // word_embeddings when mlm_decoder_w is empty (tied, as checkpoints save it).
  Tensor mlm_dense_w, mlm_dense_b, mlm_ln_gamma, mlm_ln_beta;
  Tensor mlm_decoder_w, mlm_decoder_b;
  const Tensor& mlm_decoder() const { return mlm_decoder_w.empty() ? word_embeddings : mlm_decoder_w; }

  // Every tensor, empty ones included, in a fixed order.
  std::vector<const Tensor*> All() const;
  std::vector<Tensor*> All();
};

// A model's encoder Linears quantized to 8 bits (bertrt/quantized_weights.h).
struct QuantizedWeights;

// One entry of a plan's GEMM tuning cache: the cuBLASLt algorithm timed
// fastest for one GEMM, and what it was timed for:
// "<gpu name>|cublasLt <version>|<precision>|<m>,<n>,<k>|<epilogue>".
struct GemmChoice {
  std::string gemm;
  std::string algo;  // the cublasLtMatmulAlgo_t's 64 bytes, 128 lowercase hex digits
  // Whether `algo` has that form (a plan's bytes are untrusted).
  bool AlgoWellFormed() const;
  bool operator==(const GemmChoice& o) const { return gemm == o.gemm && algo == o.algo; }
};

// Weights live on the host as fp32 (checkpoints' fp16/bf16 are widened at
// import), except that a plan's compute-precision tensors (GEMM weights and
// biases, embedding tables) stay the plan's fp16/bf16 views of the mapped
// file: the CUDA engine uploads them as they are, and the CPU engine widens
// its own copy (WithFloat32Weights). LayerNorm and classifier tensors are
// always fp32.
struct Model {
  ModelConfig config;
  ModelWeights weights;
  std::string source;  // the directory or plan it came from
  // What the importer read the weights from ("safetensors", "pytorch_model.bin
  // (zip)", ...); empty for a plan.
  std::string weights_format;
  // The files the weights were read from (for the plan's source checksum);
  // empty for a plan.
  std::vector<std::string> weights_files;
  // What the importer did on the user's behalf, as its notices said it
  // ("mapped: ...", "inferred: ...", "skipped ..."): `inspect` lists them,
  // plans keep them.
  std::vector<std::string> import_notes;
  // From a plan built with --max-batch-tokens: the largest batch engines
  // reserve memory for and the server's batch token budget; 0: no limit.
  int max_batch_tokens = 0;
  // A plan's GEMM tuning cache (empty when built without a GPU); nullopt for
  // a Hugging Face directory.
  std::optional<std::vector<GemmChoice>> gemm_choices;
  // Set: the encoder Linears are 8-bit, int8 or fp8 (an 8-bit plan, or
  // QuantizeTo8Bits's result); the weights of those Linears in `weights`
  // are then empty.
  std::shared_ptr<const QuantizedWeights> quantized;
  size_t ParameterCount() const;
};

// `model` itself when every tensor is fp32, else a copy whose fp16/bf16
// tensors are widened to fp32 (exactly).
std::shared_ptr<const Model> WithFloat32Weights(std::shared_ptr<const Model> model);

}  // namespace bertrt

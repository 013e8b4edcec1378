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
};

enum class Pooling { kCls, kMean, kMax };

const char* HeadKindName(HeadKind h);
const char* HiddenActName(HiddenAct a);
const char* PoolingName(Pooling p);

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

  HeadKind head = HeadKind::kBase;
  int num_labels = 0;               // classifier outputs (2 for QA)
  std::vector<std::string> labels;  // id2label, index = class id
  // Sentence-transformers
  Pooling pooling = Pooling::kMean;
  bool normalize = false;
  // Longest input the model serves (sentence_bert_config max_seq_length, else
  // max_position_embeddings).
  int max_seq_length = 0;

  int head_dim() const { return num_heads ? hidden_size / num_heads : 0; }
};

// Linear weights keep HF's [out_features, in_features] layout.
struct LayerWeights {
  Tensor query_w, query_b, key_w, key_b, value_w, value_b;
  Tensor attn_out_w, attn_out_b, attn_ln_gamma, attn_ln_beta;
  Tensor ffn_in_w, ffn_in_b, ffn_out_w, ffn_out_b, ffn_ln_gamma, ffn_ln_beta;
};

struct ModelWeights {
  Tensor word_embeddings, position_embeddings, token_type_embeddings;
  Tensor emb_ln_gamma, emb_ln_beta;
  std::vector<LayerWeights> layers;
  Tensor pooler_w, pooler_b;          // empty when the checkpoint has no pooler
  Tensor classifier_w, classifier_b;  // classifier / qa_outputs; empty for base/embedding

  // Every tensor, empty ones included, in a fixed order.
  std::vector<const Tensor*> All() const;
  std::vector<Tensor*> All();
};

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
  // From a plan built with --max-batch-tokens: the largest batch engines
  // reserve memory for and the server's batch token budget; 0: no limit.
  int max_batch_tokens = 0;
  // A plan's GEMM tuning cache (empty when built without a GPU); nullopt for
  // a Hugging Face directory.
  std::optional<std::vector<GemmChoice>> gemm_choices;
  size_t ParameterCount() const;
};

// `model` itself when every tensor is fp32, else a copy whose fp16/bf16
// tensors are widened to fp32 (exactly).
std::shared_ptr<const Model> WithFloat32Weights(std::shared_ptr<const Model> model);

}  // namespace bertrt

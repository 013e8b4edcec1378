#include "backends/cuda/device_weights.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "core/half.h"
#include "model/model_check.h"
#include "model/relative_position.h"
#include "model/rotary.h"

namespace bertrt::cuda {
namespace {

class Uploader {
 public:
  Uploader(Precision p, cudaStream_t stream, DeviceWeights* out)
      : precision_(p), stream_(stream), out_(out) {}

  // Concatenates the tensors and stores them in the compute precision
  // (`convert`) or as fp32; null for empty tensors.
  StatusOr<void*> Upload(const std::vector<const Tensor*>& parts, bool convert,
                         const std::string& name) {
    // A table the model does not have (rotary models' positions).
    if (std::all_of(parts.begin(), parts.end(), [](const Tensor* t) { return t->empty(); }))
      return nullptr;
    size_t n = 0;
    for (const Tensor* t : parts) n += t->numel();
    const DType target = convert ? PrecisionDType(precision_) : DType::kF32;
    DeviceBuffer dst;
    RETURN_IF_ERROR(dst.Allocate(n * DTypeSize(target), "the weights (" + name + ")",
                                 "use a smaller model, fp16/bf16, or a GPU with more memory"));
    // Tensors already in the target dtype (fp32 into fp32, a plan's fp16
    // into fp16) go straight into the destination; the rest through an fp32
    // staging buffer that the conversion kernel reads, widened on the host
    // first if they are fp16/bf16 of the other kind.
    const bool direct = std::all_of(parts.begin(), parts.end(),
                                    [&](const Tensor* t) { return t->dtype() == target; });
    if (!direct && staging_.size() < n * sizeof(float)) {
      // The old staging buffer may still be read by a queued conversion.
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      RETURN_IF_ERROR(staging_.Allocate(n * sizeof(float), "weight conversion staging",
                                        "use a GPU with more memory"));
    }
    char* bytes = static_cast<char*>(direct ? dst.get() : staging_.get());
    size_t offset = 0;
    // Copies and conversions are all ordered on `stream_`. (A plain cudaMemcpy
    // from pageable memory may return before its DMA lands, and `stream_`
    // does not wait for the legacy stream: conversions then read stale
    // staging data. The first H200 run showed exactly that.) A copy from
    // pageable memory has read its source when it returns, so `wide` may be
    // reused at once.
    std::vector<float> wide;
    for (const Tensor* t : parts) {
      const void* src = t->raw();
      if (!direct && t->dtype() != DType::kF32) {
        wide.resize(static_cast<size_t>(t->numel()));
        WidenToFloat(t->dtype(), t->raw(), wide.size(), wide.data());
        src = wide.data();
      }
      const size_t size = direct ? t->nbytes() : t->numel() * sizeof(float);
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(bytes + offset, src, size, cudaMemcpyHostToDevice, stream_));
      offset += size;
    }
    if (!direct)
      RETURN_IF_ERROR(ConvertFromFloat(convert ? precision_ : Precision::kFp32,
                                       static_cast<const float*>(staging_.get()), dst.get(), n,
                                       {stream_, false}));
    out_->bytes += dst.size();
    void* ptr = dst.get();
    out_->storage.push_back(std::move(dst));
    return ptr;
  }

 private:
  Precision precision_;
  cudaStream_t stream_;
  DeviceWeights* out_;
  DeviceBuffer staging_;
};

}  // namespace

StatusOr<DeviceWeights> UploadWeights(const Model& model, Precision precision,
                                      cudaStream_t stream) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  DeviceWeights dw;
  Uploader up(precision, stream, &dw);
  ASSIGN_OR_RETURN(dw.word, up.Upload({&w.word_embeddings}, true, "word embeddings"));
  ASSIGN_OR_RETURN(const void* positions,
                   up.Upload({&w.position_embeddings}, true, "position embeddings"));
  // Token i reads row position_offset + i (RoBERTa-family); null for rotary models.
  if (positions)
    dw.position = static_cast<const char*>(positions) +
                  size_t(c.position_offset) * c.hidden_size * DTypeSize(PrecisionDType(precision));
  ASSIGN_OR_RETURN(dw.type, up.Upload({&w.token_type_embeddings}, true, "token type embeddings"));
  const std::vector<float> bias_table = RelativePositionBiasTable(c, w);
  // Alive until the uploads are done (the synchronize below).
  const Tensor bias(DType::kF32, {static_cast<int64_t>(bias_table.size())}, bias_table.data(),
                    nullptr);
  if (!bias_table.empty()) {
    ASSIGN_OR_RETURN(void* t, up.Upload({&bias}, false, "relative position bias"));
    dw.relative_bias = static_cast<const float*>(t);
  }
  if (c.rope_theta > 0.0f) {
    // The local layers' table only where they exist with a theta of their own.
    const bool own_local = c.local_window > 0 && c.local_rope_theta != c.rope_theta;
    for (const bool local : {false, true}) {
      if (local && !own_local) {
        dw.rotary_local = dw.rotary_global;
        break;
      }
      const std::vector<float> table =
          RotaryTable(local ? c.local_rope_theta : c.rope_theta, c.head_dim(), c.max_positions());
      const Tensor t(DType::kF32, {static_cast<int64_t>(table.size())}, table.data(), nullptr);
      ASSIGN_OR_RETURN(void* d, up.Upload({&t}, false, "rotary position table"));
      // The upload has read `table` when Upload returns (a pageable copy).
      (local ? dw.rotary_local : dw.rotary_global) = static_cast<const float*>(d);
    }
  }
  // Fp32 LayerNorm parameters, or null where the model has none.
  auto upload_norm = [&](const Tensor& gamma, const Tensor& beta, const std::string& name,
                         ops::Norm* norm) -> Status {
    if (gamma.empty()) return Status::Ok();
    ASSIGN_OR_RETURN(void* dg, up.Upload({&gamma}, false, name));
    ASSIGN_OR_RETURN(void* db, up.Upload({&beta}, false, name));
    *norm = {static_cast<const float*>(dg), static_cast<const float*>(db)};
    return Status::Ok();
  };
  // A GEMM's weights (several concatenated along the output: Q | K | V) in
  // the compute precision.
  auto upload_linear = [&](const std::vector<const Tensor*>& weights,
                           const std::vector<const Tensor*>& biases, const std::string& name,
                           DeviceLinear* linear) -> Status {
    ASSIGN_OR_RETURN(linear->w, up.Upload(weights, true, name));
    ASSIGN_OR_RETURN(linear->b, up.Upload(biases, true, name));
    linear->in = static_cast<int>(weights[0]->dim(1));
    linear->out = 0;
    for (const Tensor* t : weights) linear->out += static_cast<int>(t->dim(0));
    return Status::Ok();
  };
  RETURN_IF_ERROR(upload_norm(w.emb_ln_gamma, w.emb_ln_beta, "embeddings LayerNorm", &dw.emb_norm));
  RETURN_IF_ERROR(
      upload_norm(w.final_ln_gamma, w.final_ln_beta, "final LayerNorm", &dw.final_norm));

  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "layer " + std::to_string(i) + " ";
    DeviceLayer d{};
    RETURN_IF_ERROR(upload_linear({&l.query_w, &l.key_w, &l.value_w},
                                  {&l.query_b, &l.key_b, &l.value_b}, p + "qkv", &d.qkv));
    RETURN_IF_ERROR(
        upload_linear({&l.attn_out_w}, {&l.attn_out_b}, p + "attention output", &d.attn_out));
    RETURN_IF_ERROR(upload_linear({&l.ffn_in_w}, {&l.ffn_in_b}, p + "intermediate", &d.ffn_in));
    RETURN_IF_ERROR(upload_linear({&l.ffn_out_w}, {&l.ffn_out_b}, p + "output", &d.ffn_out));
    RETURN_IF_ERROR(upload_norm(l.attn_ln_gamma, l.attn_ln_beta, p + "LayerNorm", &d.attn_norm));
    RETURN_IF_ERROR(upload_norm(l.ffn_ln_gamma, l.ffn_ln_beta, p + "LayerNorm", &d.ffn_norm));
    dw.layers.push_back(d);
  }

  if (HeadUsesPooler(model)) {
    RETURN_IF_ERROR(upload_linear({&w.pooler_w}, {&w.pooler_b}, "pooler", &dw.pooler));
    RETURN_IF_ERROR(upload_norm(w.pooler_ln_gamma, w.pooler_ln_beta, "prediction head LayerNorm",
                                &dw.pooler_norm));
  }
  if (!w.classifier_w.empty() && c.head != HeadKind::kBase &&
      c.head != HeadKind::kSentenceEmbedding && c.head != HeadKind::kSparseEmbedding) {
    const int64_t labels = w.classifier_w.dim(0);
    ASSIGN_OR_RETURN(void* cw, up.Upload({&w.classifier_w}, false, "classifier"));
    ASSIGN_OR_RETURN(void* cb, up.Upload({&w.classifier_b}, false, "classifier"));
    dw.classifier = {static_cast<const float*>(cw), static_cast<const float*>(cb),
                     static_cast<int>(w.classifier_w.dim(1)), static_cast<int>(labels)};
  }
  for (const DenseWeights& d : w.dense) {
    DeviceSmallLinear& dd = dw.dense.emplace_back();
    ASSIGN_OR_RETURN(void* dw_w, up.Upload({&d.w}, false, "Dense module"));
    dd.w = static_cast<const float*>(dw_w);
    dd.in = static_cast<int>(d.w.dim(1));
    dd.out = static_cast<int>(d.w.dim(0));
    if (!d.b.empty()) {
      ASSIGN_OR_RETURN(void* dw_b, up.Upload({&d.b}, false, "Dense module"));
      dd.b = static_cast<const float*>(dw_b);
    }
  }
  if (c.head == HeadKind::kSparseEmbedding) {
    RETURN_IF_ERROR(
        upload_linear({&w.mlm_dense_w}, {&w.mlm_dense_b}, "masked-LM transform", &dw.mlm_dense));
    RETURN_IF_ERROR(
        upload_norm(w.mlm_ln_gamma, w.mlm_ln_beta, "masked-LM LayerNorm", &dw.mlm_norm));
    // Tied: the word embeddings are the decoder.
    const Tensor& decoder = w.mlm_decoder();
    if (w.mlm_decoder_w.empty()) {
      dw.mlm_decoder.w = dw.word;
    } else {
      ASSIGN_OR_RETURN(dw.mlm_decoder.w, up.Upload({&w.mlm_decoder_w}, true, "masked-LM decoder"));
    }
    ASSIGN_OR_RETURN(dw.mlm_decoder.b, up.Upload({&w.mlm_decoder_b}, true, "masked-LM decoder"));
    dw.mlm_decoder.in = static_cast<int>(decoder.dim(1));
    dw.mlm_decoder.out = static_cast<int>(decoder.dim(0));
  }
  // The staging buffer is freed on return; everything queued must be done.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return dw;
}

}  // namespace bertrt::cuda

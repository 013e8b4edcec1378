#include "backends/cuda/engine/device_weights.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/ops/elementwise.h"
#include "backends/cuda/util/cuda_check.h"
#include "bertrt/quantized_weights.h"
#include "core/half.h"
#include "model/relative_position.h"
#include "model/rotary.h"
#include "model/weight_schema.h"

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

  // A tensor's bytes as they are (an 8-bit Linear's weights and scales).
  StatusOr<void*> UploadBytes(const Tensor& t, const std::string& name) {
    return UploadBytes(t.raw(), t.nbytes(), name);
  }
  StatusOr<void*> UploadBytes(const void* data, size_t size, const std::string& name) {
    DeviceBuffer dst;
    RETURN_IF_ERROR(dst.Allocate(size, "the weights (" + name + ")",
                                 "use a smaller model, or a GPU with more memory"));
    // (From pageable memory: `data` has been read when this returns.)
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst.get(), data, size, cudaMemcpyHostToDevice, stream_));
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

// Makes the forward's weights for PrepareWeights: GEMM weights, GEMM biases
// in the compute precision (Q | K | V concatenated), LayerNorms and small
// heads in fp32.
struct Maker {
  Uploader& up;
  const ModelWeights& model;
  const QuantizedWeights* quantized;  // an 8-bit model's Linears; null: none
  const void* word;  // the uploaded word embeddings: a tied decoder reads them

  StatusOr<DeviceLinear> Linear(const std::vector<const Tensor*>& w,
                                const std::vector<const Tensor*>& b, const std::string& name) {
    DeviceLinear l;
    if (const QuantizedLinear* q = FindQuantizedLinear(quantized, name)) {
      ASSIGN_OR_RETURN(l.w8, up.UploadBytes(q->weights, name));
      l.format = quantized->format;
      l.input_scale = q->input_scale;
      ASSIGN_OR_RETURN(l.b, up.Upload(b, true, name));
      l.in = static_cast<int>(q->weights.dim(1));
      l.out = static_cast<int>(q->weights.dim(0));
      if (l.format == QuantFormat::kFp8) {
        l.weight_scale = q->scales.f32()[0];
        return l;
      }
      RETURN_IF_ERROR(Int8Operands(*q, name, &l));
      return l;
    }
    if (w.size() == 1 && w[0] == &model.word_embeddings) {
      l.w = word;  // not uploaded twice
    } else {
      ASSIGN_OR_RETURN(l.w, up.Upload(w, true, name));
    }
    ASSIGN_OR_RETURN(l.b, up.Upload(b, true, name));
    l.in = static_cast<int>(w[0]->dim(1));
    for (const Tensor* t : w) l.out += static_cast<int>(t->dim(0));
    return l;
  }
  // An int8 Linear's vectors (DeviceLinear).
  Status Int8Operands(const QuantizedLinear& q, const std::string& name, DeviceLinear* l) {
    // (The input's quantization holds a row of up to 4,096 in registers.)
    if (l->in % 16 || l->out % 16 || l->in > 4096)
      return Unimplemented(name + " is an int8 Linear of " + std::to_string(l->in) + " -> " +
                           std::to_string(l->out) +
                           ": the GPU's int8 GEMM takes widths that are multiples of 16 and "
                           "inputs of at most 4,096; run this model's int8 on --device cpu, or "
                           "fp8 or fp16 on the GPU");
    const std::vector<int32_t> sums = Int8WeightSums(q);
    const std::vector<float> multipliers = Int8InputMultipliers(q);
    ASSIGN_OR_RETURN(void* scales, up.UploadBytes(q.scales, name));
    ASSIGN_OR_RETURN(void* device_sums, up.UploadBytes(sums.data(), sums.size() * 4, name));
    ASSIGN_OR_RETURN(void* device_multipliers,
                     up.UploadBytes(multipliers.data(), multipliers.size() * 4, name));
    l->weight_scales = static_cast<const float*>(scales);
    l->weight_sums = static_cast<const int32_t*>(device_sums);
    l->input_multipliers = static_cast<const float*>(device_multipliers);
    return Status::Ok();
  }
  StatusOr<DeviceSmallLinear> SmallLinear(const Tensor& w, const Tensor* b,
                                          const std::string& name) {
    DeviceSmallLinear l{nullptr, nullptr, static_cast<int>(w.dim(1)), static_cast<int>(w.dim(0))};
    ASSIGN_OR_RETURN(void* dw, up.Upload({&w}, false, name));
    l.w = static_cast<const float*>(dw);
    if (b) {
      ASSIGN_OR_RETURN(void* db, up.Upload({b}, false, name));
      l.b = static_cast<const float*>(db);
    }
    return l;
  }
  StatusOr<ops::Norm> Norm(const Tensor& gamma, const Tensor& beta, const std::string& name) {
    ASSIGN_OR_RETURN(void* g, up.Upload({&gamma}, false, name));
    ASSIGN_OR_RETURN(void* b, up.Upload({&beta}, false, name));
    return ops::Norm{static_cast<const float*>(g), static_cast<const float*>(b)};
  }
};

}  // namespace

DeviceLinear DeviceLinear::Outputs(int first, int count, size_t element) const {
  DeviceLinear part = *this;
  part.out = count;
  part.b = static_cast<const char*>(b) + size_t(first) * element;
  if (w8) {
    part.w8 = static_cast<const char*>(w8) + size_t(first) * in;
    if (weight_scales) part.weight_scales = weight_scales + first;
    if (weight_sums) part.weight_sums = weight_sums + first;
  } else
    part.w = static_cast<const char*>(w) + size_t(first) * in * element;
  return part;
}

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
  // The upload has read each table when Upload returns (a pageable copy).
  const RotaryTables rotary = RotaryTablesFor(c);
  for (const bool local : {false, true}) {
    const std::vector<float>& table = local ? rotary.local : rotary.global;
    if (table.empty()) continue;
    const Tensor t(DType::kF32, {static_cast<int64_t>(table.size())}, table.data(), nullptr);
    ASSIGN_OR_RETURN(void* d, up.Upload({&t}, false, "rotary position table"));
    (local ? dw.rotary_local : dw.rotary_global) = static_cast<const float*>(d);
  }
  if (!dw.rotary_local) dw.rotary_local = dw.rotary_global;
  // The forward's weights, as the schema lists them.
  Maker maker{up, w, model.quantized.get(), dw.word};
  ASSIGN_OR_RETURN(dw.forward, model::PrepareWeights<DeviceForwardWeights>(
                                   w, model::ForwardWeightSchema(model), maker));
  // The staging buffer is freed on return; everything queued must be done.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return dw;
}

}  // namespace bertrt::cuda

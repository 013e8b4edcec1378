// Backend-independent checks an engine runs once at creation, so that a model
// with inconsistent shapes is refused with a clear message instead of being
// read out of bounds later.
#pragma once

#include "bertrt/model.h"
#include "bertrt/status.h"

namespace bertrt {

// Config sanity (sizes positive, hidden divisible by heads, layer count) and
// the shapes and dtypes of every tensor the config's head needs: embeddings,
// each layer's linear weights and LayerNorms, pooler and classifier.
Status CheckModel(const Model& model);

// A tensor of this shape is present, fp32, or (`half_ok`, for the
// compute-precision tensors a plan keeps in fp16/bf16, see Model) fp16/bf16.
Status CheckTensor(const Tensor& t, const std::vector<int64_t>& shape, const std::string& name,
                   bool half_ok = false);

// InvalidArgument naming `name` when `t` (fp32, fp16 or bf16) holds a NaN or
// an infinity: weights from a diverged run or a damaged file would otherwise
// serve plausible-looking answers (NaN embeddings still give a label).
Status CheckFinite(const Tensor& t, const std::string& name);

// Whether the head ends in a classifier (sequence or token labels, QA's
// start and end).
bool HasClassifier(HeadKind head);

// Whether the head reads the pooler (pooler dense + tanh on the first token).
bool HeadUsesPooler(const Model& model);

}  // namespace bertrt

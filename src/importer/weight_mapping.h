// Binds a checkpoint's tensors, whatever their prefix and dtype, to bertrt's
// fixed ModelWeights layout, checking every shape against the config.
#pragma once

#include <cstdint>
#include <string>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "importer/checkpoint.h"
#include "importer/hf_config.h"

namespace bertrt::importer {

// An fp32 tensor for `ref`: the mapped bytes themselves when they are aligned
// F32, otherwise a converted copy.
StatusOr<Tensor> ToFloat32(const CheckpointTensor& ref);

// Fills `weights` for `config` from `ckpt`. Tensors it does not use are
// reported through `notice` (training-only ones in one summary).
Status BindWeights(const Checkpoint& ckpt, const ModelConfig& config, const NoticeFn& notice,
                   ModelWeights* weights);

// A sentence-transformers Dense module's linear layer from its folder `dir`
// (linear.weight, and linear.bias when spec.bias).
Status BindDenseWeights(const std::string& dir, const DenseSpec& spec, const NoticeFn& notice,
                        DenseWeights* weights);

}  // namespace bertrt::importer

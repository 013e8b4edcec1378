// Binds a checkpoint's tensors, whatever their prefix and dtype, to bertrt's
// fixed ModelWeights layout, checking every shape against the config.
#pragma once

#include <cstdint>
#include <string>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "checkpoint/checkpoint.h"
#include "importer/hf_config.h"

namespace bertrt::importer {


// Fills `weights` for `config` from `ckpt`. Tensors it does not use are
// reported through `notice` (training-only ones in one summary).
Status BindWeights(const checkpoint::Checkpoint& ckpt, const ModelConfig& config, const checkpoint::NoticeFn& notice,
                   ModelWeights* weights);

// A sentence-transformers Dense module's linear layer from its folder `dir`
// (linear.weight, and linear.bias when spec.bias).
Status BindDenseWeights(const std::string& dir, const DenseSpec& spec, const checkpoint::NoticeFn& notice,
                        DenseWeights* weights);

}  // namespace bertrt::importer

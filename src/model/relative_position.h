// MPNet's relative position bias, laid out for the attention kernels of both
// engines: one row per head over every key-minus-query distance.
#pragma once

#include <vector>

#include "bertrt/model.h"

namespace bertrt {

// The bucket of a key `relative` = j - i positions after its query, as
// transformers' MPNet computes it (T5's bidirectional buckets, max distance
// 128), in its float32 arithmetic.
int RelativePositionBucket(int relative, int num_buckets);

// [heads][2 * span - 1], span = config.max_positions(): entry
// (head, j - i + span - 1) is the bias head `head` adds to query i's score
// of key j. Empty when the model has no relative position bias.
std::vector<float> RelativePositionBiasTable(const ModelConfig& config,
                                             const ModelWeights& weights);

}  // namespace bertrt

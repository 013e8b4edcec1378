// The precision an engine computes in, as the command line, plans and the
// serving core name it.
#pragma once

#include <string_view>

#include "bertrt/status.h"
#include "bertrt/tensor.h"

namespace bertrt {

// The precision of the GEMMs, attention and activations. Accumulation,
// softmax and LayerNorm statistics are fp32 in every mode.
enum class Precision { kFp32, kFp16, kBf16 };

// "fp32" | "fp16" | "bf16".
StatusOr<Precision> ParsePrecision(std::string_view text);
const char* PrecisionName(Precision precision);
// The dtype a tensor computed in this precision is stored in: F32, F16 or BF16.
DType PrecisionDType(Precision precision);

}  // namespace bertrt

#include <string>

#include "bertrt/cuda_engine.h"

namespace bertrt {

StatusOr<Precision> ParsePrecision(std::string_view text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "fp16") return Precision::kFp16;
  if (text == "bf16") return Precision::kBf16;
  return InvalidArgument("unknown precision '" + std::string(text) +
                         "'; expected fp32, fp16 or bf16");
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

}  // namespace bertrt

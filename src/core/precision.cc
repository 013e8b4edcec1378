#include <string>

#include "bertrt/precision.h"

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

DType PrecisionDType(Precision precision) {
  switch (precision) {
    case Precision::kFp16: return DType::kF16;
    case Precision::kBf16: return DType::kBF16;
    case Precision::kFp32: break;
  }
  return DType::kF32;
}

}  // namespace bertrt

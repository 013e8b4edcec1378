#include "bertrt/tensor.h"

#include <algorithm>
#include <cstdlib>

namespace bertrt {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: case DType::kI16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: case DType::kF8E4M3: return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI16: return "I16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
    case DType::kF8E4M3: return "F8_E4M3";
  }
  return "?";
}

bool IsWeightDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

Tensor Tensor::ZerosF32(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  // 64-byte alignment so that SIMD loads and GEMM libraries get aligned rows.
  size_t bytes = ((static_cast<size_t>(n) * sizeof(float) + 63) / 64) * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  std::fill_n(static_cast<float*>(p), bytes / sizeof(float), 0.0f);
  std::shared_ptr<const void> owner(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  return Tensor(DType::kF32, std::move(shape), p, std::move(owner));
}

}  // namespace bertrt

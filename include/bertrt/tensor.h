// A typed, shaped view of memory with shared ownership of its storage. Weights
// are Tensors that point into a file read into memory or into a buffer the importer
// converted them to; the owner keeps that storage alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bertrt {

enum class DType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool, kF8E4M3 };

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);  // safetensors spelling: "F32", "BF16", ...

std::string ShapeToString(const std::vector<int64_t>& shape);  // "[768, 3072]"

// F32, F16 or BF16: the dtypes a Model's weights and a plan's tensors come in.
bool IsWeightDType(DType dtype);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape, const void* data,
         std::shared_ptr<const void> owner)
      : dtype_(dtype), shape_(std::move(shape)), data_(data), owner_(std::move(owner)) {}

  // A new zero-filled fp32 tensor that owns its storage.
  static Tensor ZerosF32(std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool empty() const { return data_ == nullptr; }

  const void* raw() const { return data_; }
  const float* f32() const { return static_cast<const float*>(data_); }
  // Rows [first, first + count) of a tensor of rank >= 1, sharing its storage.
  Tensor Rows(int64_t first, int64_t count) const {
    std::vector<int64_t> shape = shape_;
    shape[0] = count;
    const size_t row_bytes = shape_[0] ? nbytes() / static_cast<size_t>(shape_[0]) : 0;
    return Tensor(dtype_, std::move(shape),
                  static_cast<const char*>(data_) + static_cast<size_t>(first) * row_bytes, owner_);
  }
  // Only for tensors created by ZerosF32 (or otherwise owned and writable).
  float* mutable_f32() { return const_cast<float*>(f32()); }

 private:
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  const void* data_ = nullptr;
  std::shared_ptr<const void> owner_;
};

}  // namespace bertrt

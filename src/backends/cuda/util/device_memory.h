// Owning handles for device and pinned host memory, whose allocation failures
// say how much was asked for and which setting to lower.
#pragma once

#include <cstddef>
#include <string>

#include "bertrt/status.h"

namespace bertrt::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = static_cast<DeviceBuffer&&>(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Release(); }

  // Replaces the contents with `bytes` uninitialized bytes. `what` names the
  // use and `hint` the setting that would make it smaller.
  Status Allocate(size_t bytes, const std::string& what, const std::string& hint);
  void Release();
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Page-locked host memory: the only kind an async copy overlaps with.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { Release(); }

  Status Allocate(size_t bytes, const std::string& what);
  void Release();
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace bertrt::cuda

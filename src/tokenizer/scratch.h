// The tokenizer's per-thread buffers keep their capacity from one text to
// the next, so that the usual short text costs no allocation. A text that
// needed more gives it back when it is done: a server tokenizes on many
// threads, and each would otherwise keep the largest text it ever saw.
#pragma once

#include <cstddef>
#include <tuple>

namespace bertrt::tokenizer {

// What a buffer may keep: well above what a model's longest input needs.
inline constexpr size_t kScratchKeepBytes = 128 << 10;

// Frees `v` (a std::vector or std::basic_string) when it holds more.
template <typename Buffer>
void ReleaseLargeScratch(Buffer& v) {
  if (v.capacity() * sizeof(typename Buffer::value_type) > kScratchKeepBytes) Buffer().swap(v);
}

// ReleaseLargeScratch on each buffer when the scope ends, however it ends.
template <typename... Buffers>
class ScratchGuard {
 public:
  explicit ScratchGuard(Buffers&... buffers) : buffers_(buffers...) {}
  ~ScratchGuard() {
    std::apply([](auto&... b) { (ReleaseLargeScratch(b), ...); }, buffers_);
  }
  ScratchGuard(const ScratchGuard&) = delete;
  ScratchGuard& operator=(const ScratchGuard&) = delete;

 private:
  std::tuple<Buffers&...> buffers_;
};

}  // namespace bertrt::tokenizer

// CRC32C (Castagnoli): the checksum of plan headers, tables and sections, and
// of TensorFlow checkpoints (their index blocks and tensors):
// SSE4.2's crc32 instruction makes it run at several GB/s, so checking every
// byte of a BERT-base plan at load costs tens of milliseconds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bertrt {

// Continues `crc` (0 to start) over `data`.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace bertrt

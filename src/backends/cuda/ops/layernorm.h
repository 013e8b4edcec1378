// The launchers of layernorm.cu (ops/launch.h says what they take).
#pragma once

#include <cstdint>

#include "backends/cuda/ops/launch.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

struct EmbeddingArgs {
  const int32_t* ids;         // [tokens], validated against the vocabulary
  const int32_t* types;       // [tokens]
  const int32_t* cu_seqlens;  // [num_seqs + 1]
  int num_seqs;
  int num_tokens;
  const void* word;      // [vocab, hidden]
  const void* position;  // [max_pos, hidden]; null: none (rotary positions)
  const void* type;      // [type_vocab, hidden]
  const float* gamma;
  const float* beta;
  int hidden;
  float eps;
  void* out;  // [tokens, hidden]
};

// out[t] = LayerNorm(word[ids[t]] + position[t - start of its sequence] + type[types[t]]),
// without the position term where there is no table.
Status EmbedLayerNorm(Precision p, const EmbeddingArgs& a, Stream stream);

// Where a LayerNorm also writes its output as an FP8 GEMM's input:
// QuantizeToE4M3(out, scale) into `bytes` ([rows, hidden]), made from the
// values as they are written: in the same pass where one warp takes a row
// (fp16/bf16 widths that are multiples of 256 up to 2048: BERT-base's and
// large's), else in a pass after it; bytes null: not.
struct E4M3Output {
  void* bytes = nullptr;
  float scale = 0.0f;
};

// Where a LayerNorm also writes its output as the int8 GEMM's input: what
// QuantizeRowsToUint8(out, mult, input_scale) makes of it (the rows' bytes,
// scales and zero points), from the values as they are written; in the same
// pass on the warp path (fp16 only: the int8 engine's), else in a pass after
// it; bytes null: not.
struct Uint8Output {
  void* bytes = nullptr;        // [rows, hidden]
  const float* mult = nullptr;  // [hidden]
  float input_scale = 0.0f;     // 0: per token
  float* row_scales = nullptr;  // [rows]
  int32_t* row_zeros = nullptr;  // [rows]
};

// out[r] = LayerNorm(in[r]) * gamma + beta; in may equal out. At most one
// of e4m3 and u8 is given.
Status LayerNorm(Precision p, const void* in, void* out, int rows, int hidden, const float* gamma,
                 const float* beta, float eps, Stream stream, E4M3Output e4m3 = {},
                 Uint8Output u8 = {});

}  // namespace bertrt::cuda

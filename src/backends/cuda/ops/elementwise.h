// The launchers of elementwise.cu (ops/launch.h says what they take).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "backends/cuda/ops/launch.h"
#include "bertrt/model.h"
#include "bertrt/precision.h"
#include "bertrt/status.h"

namespace bertrt::cuda {

// x = act(x), x 16-byte aligned. The fp16/bf16 engines fuse gelu_new and relu into the GEMM
// epilogue and need this only for the erf GELU (cuBLASLt's GELU is the tanh
// form); the fp32 engine uses it for all three, to match the CPU engine's
// exact tanh.
Status ActivationInPlace(Precision p, HiddenAct act, void* x, size_t n, Stream stream);

// GeGLU (ModelConfig::gated_ffn): out[r, i] = act(in[r, i]) * in[r, inter + i]
// for in [rows, 2 inter] and out [rows, inter] (cpu::GatedGelu's definition),
// in fp32 arithmetic.
Status GatedActivation(Precision p, HiddenAct act, const void* in, int rows, int inter,
                       void* out, Stream stream);

// Rotary positions on Q and K of qkv [tokens, 3 hidden], in place
// (cpu::ApplyRotary's definition): the token at position p of its sequence
// is rotated by row p of `table` (RotaryTable, fp32 on the device), in fp32
// arithmetic.
Status ApplyRotary(Precision p, void* qkv, const int32_t* cu_seqlens, int num_seqs, int tokens,
                   int hidden, int heads, const float* table, Stream stream);

// Writes the GPU's global timer (nanoseconds) to *slot once every operation
// before it on `stream` has finished: a profiled forward's marks between
// operations. Launched plainly (never overlapped), so that it waits for the
// whole of the operation before it.
Status StampTime(uint64_t* slot, cudaStream_t stream);

Status ConvertFromFloat(Precision p, const float* in, void* out, size_t n, Stream stream);
Status ConvertToFloat(Precision p, const void* in, float* out, size_t n, Stream stream);
// out[i] = E4M3(in[i] / scale), one byte each, rounded to nearest even and
// saturating at +-448: an FP8 GEMM's input (LtGemm::LinearFp8). 16 bytes of
// `in` at a time where it is 16-byte aligned.
Status QuantizeToE4M3(Precision p, const void* in, float scale, void* out, size_t n,
                      Stream stream);
// out[i] = E4M3(act(in[i]) / scale), act(in[i]) rounded to the engine's
// precision first: QuantizeToE4M3 of what ActivationInPlace would leave, in
// one pass (an FP8 GEMM's input straight from the activation before it;
// Tuning::fused_quantization). No act: QuantizeToE4M3.
Status ActivateToE4M3(Precision p, std::optional<HiddenAct> act, const void* in, float scale,
                      void* out, size_t n, Stream stream);

// Each row of `in` [rows, width] (fp16; width a multiple of 16 and at most
// 4,096, 16-byte aligned) onto uint8 for the int8 GEMM (int8_gemm.h) with its scale and zero point,
// as the CPU engine's int8 GEMM quantizes its input: x[k] * mult[k] (the
// smoothing divisor's and the input scale's reciprocals), then per token
// (`input_scale` 0) the row's range (0 included) onto 0..255, or per tensor
// the signed value on [-127, 127] plus 128 (zero point 128, scale
// `input_scale`). out [rows, width] bytes, row_scales and row_zeros [rows].
Status QuantizeRowsToUint8(Precision p, const void* in, int rows, int width, const float* mult,
                           float input_scale, void* out, float* row_scales, int32_t* row_zeros,
                           Stream stream);

// The compute capability this build's kernels run as on the current GPU
// (90 for sm_90): the GPU's own where the build has code for it, lower where
// the driver compiles an older architecture's PTX for it (a build for
// compute_75 on an H200). Device code is compiled per architecture, and the
// kernels' paths for newer ones (mma.sync from 80; griddepcontrol, wgmma
// and TMA from 90) are not in older code: the engine must dispatch on this,
// not on the GPU's capability, or it launches kernels whose bodies are empty
// and overlaps launches no kernel waits for. Read once per call by a
// one-thread kernel; synchronizes `stream`.
StatusOr<int> KernelComputeCapability(cudaStream_t stream);

}  // namespace bertrt::cuda

#pragma once

namespace bertrt::cuda {

// What a GEMM's epilogue applies after adding the bias (LtGemm::Linear,
// SplitKLinear). kBiasGelu (the erf form) only through LinearLayers::Run:
// cuBLASLt has no such epilogue (bias_gelu_gemm.h).
enum class Epilogue { kBias, kBiasGeluTanh, kBiasRelu, kBiasGelu };

}  // namespace bertrt::cuda

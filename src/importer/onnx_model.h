// Reads the weights of an ONNX export of a transformers encoder (model.onnx:
// torch.onnx.export's TorchScript or dynamo exporter, optimum's export,
// onnxruntime's dynamic int8 quantization) without ONNX Runtime, back under
// the names the model had in transformers, so the family's weight mapping
// binds them like any other checkpoint.
//
// The exporters keep most parameter names (embeddings, LayerNorms, biases,
// Gemm weights) but give a Linear's MatMul weight a name of their own
// (`onnx::MatMul_370`, `val_74`), stored [in, out]. Walking the graph gives it
// back its role: the bias added to that MatMul's output (through the int8
// path's Cast and scale Mul) names the layer. Int8 weights
// (`X_quantized`, `X_scale`, `X_zero_point`) are dequantized to fp32.
// Graphs fused by onnxruntime's transformer optimizer (com.microsoft
// Attention, SkipLayerNormalization, ...) are refused with the op's name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bertrt/status.h"
#include "importer/checkpoint.h"

namespace bertrt::importer {

struct OnnxWeights {
  std::vector<CheckpointTensor> tensors;
  int dequantized = 0;  // how many were int8 in the file
};

// Reads `path` (external data files from its directory).
StatusOr<OnnxWeights> ReadOnnxModel(const std::string& path);

// The same from the model's bytes; external data is looked for in `dir`
// (empty: refused). Used by the fuzz target.
StatusOr<OnnxWeights> ParseOnnxModel(std::string_view bytes, const std::string& dir,
                                     const std::string& display_name);

}  // namespace bertrt::importer

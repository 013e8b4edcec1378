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
//
// The graph also tells what config.json would: sizes from the weights, the
// head width from the Reshape that splits Q/K/V into heads, the activation
// (Erf: gelu; the tanh form's sqrt(2/pi): gelu_new; Relu), the LayerNorm
// epsilon, the head from the weights and the outputs' ranks. A folder without
// config.json is read with that (BERT, RoBERTa/XLM-R and DistilBERT); one
// with config.json is checked against it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bertrt/status.h"
#include "checkpoint/checkpoint.h"

namespace bertrt::checkpoint {

struct OnnxWeights {
  std::vector<CheckpointTensor> tensors;
  std::vector<std::string> files;  // the model and its external data files
  int dequantized = 0;             // how many were int8 in the file
  int named_by_bias = 0;           // Linear weights named after the bias that follows them
  ImpliedConfig config;
};

// Reads `path` (external data files from its directory).
StatusOr<OnnxWeights> ReadOnnxModel(const std::string& path);

// The same from the model's bytes; external data is looked for in `dir`
// (empty: refused). Used by the fuzz target.
StatusOr<OnnxWeights> ParseOnnxModel(std::string_view bytes, const std::string& dir,
                                     const std::string& display_name);

}  // namespace bertrt::checkpoint

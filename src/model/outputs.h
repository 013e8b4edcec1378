// Output assembly shared by the backends: a run's outputs, as DescribeOutputs
// lays them out, copied out of the head's arrays the backend computed.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "bertrt/engine.h"
#include "bertrt/head_outputs.h"
#include "bertrt/model.h"

namespace bertrt {

// A head array's values on the host: column c of row r at
// data[r * stride + c - first_column] (a backend may hold only the columns
// its outputs read: ArraySpans).
struct HostArray {
  const float* data = nullptr;
  int stride = 0;
  int first_column = 0;
};

struct HostArrays {
  HostArray arrays[kHeadArrayCount];
  HostArray& operator[](HeadArray a) { return arrays[static_cast<int>(a)]; }
  const HostArray& operator[](HeadArray a) const { return arrays[static_cast<int>(a)]; }
};

// The outputs a run returns (the on-request ones only with
// `last_hidden_state`), in `outputs`' order, each copied out of its array's
// rows: `tokens` of them per token, else `seqs`. Internal when an array an
// output reads was not computed.
StatusOr<BatchOutputs> AssembleOutputs(const std::vector<OutputDescription>& outputs,
                                       bool last_hidden_state, const HostArrays& arrays,
                                       size_t tokens, size_t seqs);

// The columns [begin, end) of one head array that a run's outputs read, in
// the order the outputs first read each array: what a backend that computes
// in device memory copies back (once per array, however many outputs read it).
struct ArraySpan {
  HeadArray array;
  bool per_token;
  int array_width, begin, end;
};
std::vector<ArraySpan> ArraySpans(const std::vector<OutputDescription>& outputs,
                                  bool last_hidden_state);

// The rows an output is compared by (plan verification, the 8-bit accuracy
// report): one per sequence for per-sequence outputs, one per token for
// per-token ones, except width-1 ones (question answering's start and end
// logits), whose row is the sequence: its argmax is where the span starts or
// ends.
struct ComparedRow {
  const float* data;
  size_t n;
};
std::vector<ComparedRow> ComparedRows(const NamedOutput& output, const RaggedBatch& batch);

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// A classifier's scores from its logits, as TEI and transformers' pipelines
// give them: a softmax over several labels, a sigmoid of a single logit (a
// cross-encoder's relevance).
std::vector<float> ClassScores(const float* logits, int n);

}  // namespace bertrt

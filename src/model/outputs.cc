#include "model/outputs.h"

#include <algorithm>
#include <cmath>

namespace bertrt {

StatusOr<BatchOutputs> AssembleOutputs(const std::vector<OutputDescription>& outputs,
                                       bool last_hidden_state, const HostArrays& arrays,
                                       size_t tokens, size_t seqs) {
  BatchOutputs out;
  for (const OutputDescription& o : outputs) {
    if (!Returned(o, last_hidden_state)) continue;
    const HostArray& a = arrays[o.array];
    if (!a.data) return Internal("the engine computed no array for output " + o.name);
    const size_t rows = o.per_token ? tokens : seqs, width = o.width;
    const size_t stride = a.stride;
    const float* from = a.data + (o.first_column - a.first_column);
    NamedOutput& n = out.outputs.emplace_back();
    n.name = o.name;
    n.per_token = o.per_token;
    n.width = o.width;
    if (stride == width) {
      n.data.assign(from, from + rows * width);
    } else if (width == 1) {  // a column of a wider array: question answering's logits
      n.data.resize(rows);
      for (size_t r = 0; r < rows; ++r) n.data[r] = from[r * stride];
    } else {
      n.data.resize(rows * width);
      for (size_t r = 0; r < rows; ++r)
        std::copy_n(from + r * stride, width, n.data.begin() + r * width);
    }
  }
  return out;
}

std::vector<ArraySpan> ArraySpans(const std::vector<OutputDescription>& outputs,
                                  bool last_hidden_state) {
  std::vector<ArraySpan> spans;
  for (const OutputDescription& o : outputs) {
    if (!Returned(o, last_hidden_state)) continue;
    const int begin = o.first_column, end = o.first_column + o.width;
    auto same = std::find_if(spans.begin(), spans.end(),
                             [&](const ArraySpan& s) { return s.array == o.array; });
    if (same == spans.end()) {
      spans.push_back({o.array, o.per_token, o.array_width, begin, end});
    } else {
      same->begin = std::min(same->begin, begin);
      same->end = std::max(same->end, end);
    }
  }
  return spans;
}

std::vector<ComparedRow> ComparedRows(const NamedOutput& o, const RaggedBatch& batch) {
  std::vector<ComparedRow> rows;
  if (!o.per_token) {
    for (int s = 0; s < batch.num_seqs(); ++s)
      rows.push_back({o.data.data() + size_t(s) * o.width, size_t(o.width)});
  } else if (o.width == 1) {
    for (int s = 0; s < batch.num_seqs(); ++s)
      rows.push_back({o.data.data() + batch.cu_seqlens[s],
                      size_t(batch.cu_seqlens[s + 1] - batch.cu_seqlens[s])});
  } else {
    for (int t = 0; t < batch.num_tokens(); ++t)
      rows.push_back({o.data.data() + size_t(t) * o.width, size_t(o.width)});
  }
  return rows;
}

std::vector<float> ClassScores(const float* logits, int n) {
  std::vector<float> p(logits, logits + n);
  if (n == 1) {
    p[0] = Sigmoid(p[0]);
    return p;
  }
  const float top = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (float& v : p) sum += (v = std::exp(v - top));
  for (float& v : p) v = static_cast<float>(v / sum);
  return p;
}

}  // namespace bertrt
